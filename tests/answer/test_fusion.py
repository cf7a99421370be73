"""Hybrid retrieval's fusion: reciprocal ranks, with each retriever's best kept."""

from __future__ import annotations

from ragcli.answer.retrieval import RRF_K, fuse


def test_rankings_that_agree_fuse_in_their_order():
    fused = fuse([[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]], 3)
    assert [i for i, _ in fused] == [1, 2, 3]
    assert fused[0][1] == 2 / (RRF_K + 1)


def test_each_rankings_best_keeps_a_place_in_the_top_k():
    dense = [9, 1, 2, 3, 4]  # 9: the closest in meaning, which BM25 does not find
    lexical = [5, 1, 2, 3, 4]  # 5: the best word match, which the vectors rank low
    fused = [i for i, _ in fuse([dense, lexical], 4)]
    assert fused == [1, 2, 9, 5]  # the two best fused first, then each ranking's first
    assert [i for i, _ in fuse([dense, lexical], 8)][:4] == [1, 2, 3, 4]


def test_a_first_in_the_last_fused_place_is_not_pushed_out_by_the_other_first():
    # 5, BM25's best, is second fused; 9, the vectors' best, is not in the fused top 2.
    assert [i for i, _ in fuse([[9, 1, 2, 5], [5, 1, 2, 3]], 2)] == [5, 9]
    # 5 has fused place 4 of 4, after 1, 2 and 3; 9 needs a place too.
    assert [i for i, _ in fuse([[9, 1, 2, 3, 6, 7, 8, 5], [5, 1, 2, 3]], 4)] == [1, 2, 5, 9]


def test_small_k_and_empty_rankings():
    assert [i for i, _ in fuse([[9, 1, 2], [5, 1, 2]], 1)] == [9]
    assert [i for i, _ in fuse([[], [5, 1]], 2)] == [5, 1]
    assert fuse([[], []], 4) == []
