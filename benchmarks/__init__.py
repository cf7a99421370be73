"""The team's lab: question-set generators, the answerability fit and measurements that
only the people building ragcli run. Not installed with the package; `make bench` and
`make bench-answers` run it from the repository, and `make test` tests it.

Everything here reaches ragcli through its public face (``ragcli.Rag``, the settings,
the errors) or public functions of its modules, never through private names.
"""
