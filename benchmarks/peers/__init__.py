"""The same fake-model workload driven through Tether and through its peers (LangGraph, DBOS).

Each side module exposes the same small set of functions (one conversation of ``turns``
tool turns, its on-disk bytes, a 1-turn latency sample, a log to resume, a cold resume in a
fresh process). The peer modules import their package lazily: without the ``bench`` extra
``available()`` is false and the runner prints "skipped: install tether[bench]".
"""
