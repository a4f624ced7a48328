"""``grep``'s patterns: RE2, searching a file whole, finds the lines ``re`` finds line by line;
what RE2 cannot run, or would read otherwise, runs on ``re``."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tether.tools._regex as regex_module
from tether.tools import InvalidPattern
from tether.tools._regex import LineSearch

SAMPLE = "alpha beta\nTODO: x\r\n\n  indented TODO\ntodo é\nÉtude\nend"


def _on_re(pattern: str, ignore_case: bool) -> LineSearch:
    """The pattern as it is searched where RE2 is not installed. (Not monkeypatch: hypothesis
    runs many examples in one call of a test, and a function-scoped fixture once.)"""
    saved, regex_module.RE2 = regex_module.RE2, None
    try:
        return LineSearch(pattern, ignore_case=ignore_case)
    finally:
        regex_module.RE2 = saved


def _found(search: LineSearch, text: str) -> list[tuple[int, str]]:
    return list(search.lines(text.encode(), text))


@pytest.mark.parametrize(
    "pattern",
    [
        "TODO",
        "^TODO",
        "TODO$",
        "x$",  # before a \r: no match on either
        r"\s+TODO",
        "[^a-z]",
        "a.b",  # never across a line end
        "^$",
        "",
        r"\bbeta\b",
        "beta\n",  # a line end in the pattern never matches
        r"[\s\S]x",
        "é",
        "(?i)étude",
        "o+$",
    ],
)
@pytest.mark.parametrize("ignore_case", [False, True])
def test_re2_finds_the_lines_re_finds(pattern: str, ignore_case: bool) -> None:
    on_re2, on_re = LineSearch(pattern, ignore_case=ignore_case), _on_re(pattern, ignore_case)
    assert (on_re2.engine, on_re.engine) == ("re2", "re")
    for text in (SAMPLE, SAMPLE + "\n", "", "\n\n"):
        assert _found(on_re2, text) == _found(on_re, text), (pattern, text)


_PIECES = ["a", "b", " ", ".", "^", "$", r"\s", r"\S", "[ab]", "[^a]", "a*", "b+", "(a|b)", "x?"]


@given(
    st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5),
    st.text(alphabet="ab \n\r", max_size=30),
    st.booleans(),
)
def test_re2_and_re_agree_on_any_pattern_and_text(
    pieces: list[str], text: str, ignore_case: bool
) -> None:
    pattern = "".join(pieces)
    on_re2, on_re = LineSearch(pattern, ignore_case=ignore_case), _on_re(pattern, ignore_case)
    assert on_re2.engine == "re2"
    assert _found(on_re2, text) == _found(on_re, text)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(\w)\1", "a backreference"),
        ("(?=a)a", "a lookahead"),
        ("(?<!a)b", "a lookbehind"),
        ("(?>a+)b", "an atomic group"),
        ("a*+b", "a possessive repeat"),
        ("(?x) a b", "verbose mode"),
        (r"\Aa", "\\A: a line's start to re, the file's to a whole-file search"),
        ("a{,2}b", "{,n}: a repeat to re, text to RE2"),
    ],
)
def test_what_re2_cannot_run_or_reads_otherwise_runs_on_re(pattern: str, why: str) -> None:
    assert LineSearch(pattern, ignore_case=False).engine == "re", why


def test_re_runs_what_re2_cannot() -> None:
    doubled = LineSearch(r"(\w)\1", ignore_case=False)
    assert _found(doubled, "abc\nbook\nx") == [(2, "book")]
    anchored = LineSearch(r"\Aab", ignore_case=False)
    assert _found(anchored, "ab\nxab\nab") == [(1, "ab"), (3, "ab")]
    repeat = LineSearch("xa{,2}b", ignore_case=False)
    assert _found(repeat, "xb\nxaab\nxaaab\nxa{,2}b") == [(1, "xb"), (2, "xaab")]


@pytest.mark.parametrize("pattern", ["(", "[z-a]", "a{2,1}", "(?P<x>a)(?P<x>b)", "\\"])
def test_a_pattern_re_refuses_is_invalid_on_either_engine(pattern: str) -> None:
    with pytest.raises(InvalidPattern, match="invalid regular expression"):
        LineSearch(pattern, ignore_case=False)


def test_lines_are_numbered_across_long_gaps() -> None:
    text = "".join(f"line {n}{' hit' if n % 250 == 0 else ''}\n" for n in range(1, 1001))
    found = _found(LineSearch("hit$", ignore_case=False), text)
    assert found == [(n, f"line {n} hit") for n in (250, 500, 750, 1000)]
