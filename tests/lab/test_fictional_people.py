"""The fictional-facts set: reproducible, big enough, its answers written and its gaps not."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import fictional_people as facts
from benchmarks.fictional_people import OCCUPATIONS, PET_NAMES, PET_SPECIES, write_set

KEYS = {"id", "question", "answers", "answerable", "source", "kind"}
PERSON_FACTS = {"birth_year", "pet", "occupation", "moved_to", "spouse"}
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]

# Words that say a fact of this kind; an unwritten fact's page must hold none of them.
MARKERS = {
    "birth_year": r"\b(born|came into the world)\b.*\b(1[89]|20)\d\d\b"
    r"|\b(1[89]|20)\d\d\b.*\bborn\b",
    "pet": r"\b(pets?|{})s?\b".format("|".join(PET_SPECIES + PET_NAMES)),
    "occupation": r"\b(works?|by trade|living as|employed|occupation|{})\b".format(
        "|".join(OCCUPATIONS)
    ),
    "moved_to": r"\b(moved|settled|relocated|moving|made (his|her) home)\b",
    "spouse": r"\b(married|husband|wife|spouse|wedding)\b",
    "population": r"\b(population|inhabitants|residents|people live|live there)\b",
    "mayor": r"\bmayor\b",
    "founded": r"\b(founded|established|dates from)\b",
    "river": r"\b(river|banks|flows|runs through)\b",
}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def _load(out: Path, seed: int = 7) -> tuple[dict[str, str], list[dict]]:
    docs, qpath = write_set(out, seed)
    assert docs == out / "docs" and qpath == out / "questions.jsonl"
    pages = {f.name: f.read_text(encoding="utf-8") for f in sorted(docs.glob("*.md"))}
    rows = [json.loads(line) for line in qpath.read_text(encoding="utf-8").splitlines()]
    return pages, rows


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list[dict]]:
    return _load(tmp_path_factory.mktemp("facts"))


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()
    }


def test_a_seed_gives_the_same_bytes_and_another_seed_other_ones(tmp_path: Path):
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        write_set(tmp_path / name, seed)
    a, b, c = (_files(tmp_path / n) for n in "abc")
    assert a == b
    assert a["questions.jsonl"] != c["questions.jsonl"]
    assert set(a) != set(c)  # other people, so other pages


def test_a_docs_folder_with_other_pages_is_refused(tmp_path: Path):
    write_set(tmp_path, 7)
    with pytest.raises(FileExistsError):
        write_set(tmp_path, 8)


def test_the_set_is_big_enough_and_well_formed(made):
    pages, rows = made
    assert len(pages) >= 36
    assert len(rows) >= 48
    kinds = Counter(r["kind"] for r in rows)
    assert kinds["count"] >= 14 and kinds["unwritten"] >= 12
    assert kinds["relation"] >= 8 and kinds["attribute"] >= 10 and kinds["list-member"] >= 3
    assert [r["id"] for r in rows] == [f"facts-{i:03d}" for i in range(1, len(rows) + 1)]
    for r in rows:
        assert set(r) >= KEYS, r
        assert r["answerable"] == (r["kind"] != "unwritten"), r
        assert bool(r["answers"]) == r["answerable"], r
        assert (r["source"] in pages) if r["answerable"] else r["source"] is None, r
    counts = [int(r["answers"][0]) for r in rows if r["kind"] == "count"]
    assert 1 in counts and {4, 5} & set(counts)
    assert len({r["question"].split()[0] for r in rows}) >= 5  # not one template for all
    for name, text in pages.items():
        n = len(re.findall(r"[A-Za-z0-9]+(?:['-][A-Za-z0-9]+)*", text))
        assert 80 <= n <= 250, (name, n)


def test_every_answer_is_written_in_its_source(made):
    pages, rows = made
    for r in rows:
        if not r["answerable"]:
            continue
        page = pages[r["source"]].lower()
        if r["kind"] == "count":
            items, (digit, word) = r["items"], r["answers"]
            assert len(items) == int(digit) and word == WORDS[int(digit)], r
            assert len(set(items)) == len(items), r
            for item in items:
                assert item.lower() in page, (r["id"], item)
        else:
            assert r["answers"][0].lower() in page, r


def test_a_persons_page_names_a_siblings_children_of_another_count():
    """The wrong-sibling distractor: a count of the nephews is never the count asked for."""
    world = facts._build(random.Random(7), [])
    rng = random.Random(7)
    for p in world.people:
        assert p.nephews and len(p.nephews) != len(p.children), p.full
        page = facts.person_page(p, rng)
        sib = p.siblings[0]
        assert sib.full in page and all(k.first in page for k in [*p.nephews, *p.children])


def test_first_names_given_as_answers_name_one_person(made):
    """An alias is a substring check: 'Ilse' must not also be part of 'Ilsebet' or a second Ilse."""
    pages, rows = made
    corpus = "\n".join(pages.values())
    tokens = set(re.findall(r"[a-z]+", corpus.lower()))
    for r in rows:
        if r["kind"] in ("relation", "attribute") and len(r["answers"]) == 2:
            full, first = r["answers"]
            assert full.startswith(first + " "), r
            assert not [t for t in tokens if first.lower() in t and t != first.lower()], r
            surnames = set(re.findall(rf"\b{first} ([A-Z][a-z]+)", corpus))
            assert surnames <= {full.split()[-1]}, r


def test_unwritten_facts_are_nowhere(made):
    pages, rows = made
    corpus = "\n".join(pages.values())
    unwritten = [r for r in rows if r["kind"] == "unwritten"]
    ghosts = [r for r in unwritten if r["attribute"] == "person"]
    assert len(ghosts) >= 2
    for r in ghosts:  # nobody of that name, but someone of that surname
        first, last = r["subject"].split()
        assert first.lower() not in corpus.lower(), r
        assert re.search(rf"\b{last}\b", corpus), r
    for r in unwritten:
        if r["attribute"] == "person":
            continue
        subject, marker = r["subject"], re.compile(MARKERS[r["attribute"]], re.IGNORECASE)
        own = pages[_slug(subject) + ".md"]
        assert own.startswith(f"# {subject}\n"), r
        for sentence in _sentences(own):
            assert not marker.search(sentence), (r["id"], sentence)
        # elsewhere: the sentences naming a person's first name or a place's name
        mention = subject.split()[0] if r["attribute"] in PERSON_FACTS else subject
        for name, text in pages.items():
            for sentence in _sentences(text):
                if re.search(rf"\b{mention}\b", sentence) and name != _slug(subject) + ".md":
                    assert not marker.search(sentence), (r["id"], name, sentence)


def test_the_markers_would_catch_a_written_fact(made):
    """The check above can fail: every marker finds its fact on a page that writes it."""
    pages, rows = made
    for r in rows:
        if r["answerable"] and r.get("attribute") in MARKERS:
            own = pages[r["source"]]
            assert re.search(MARKERS[r["attribute"]], own, re.IGNORECASE), r
    kinds = {r["attribute"] for r in rows if r["answerable"]} & set(MARKERS)
    assert kinds == set(MARKERS)
