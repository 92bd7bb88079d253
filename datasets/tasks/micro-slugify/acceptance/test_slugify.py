import pytest

from textkit import slugify


@pytest.mark.severity("minor")
def test_returns_a_string():
    assert isinstance(slugify("hello"), str)


@pytest.mark.severity("critical")
def test_lowercases_and_joins_words_with_a_hyphen():
    assert slugify("Hello World") == "hello-world"


@pytest.mark.severity("major")
def test_collapses_runs_of_separators():
    assert slugify("a  --  b") == "a-b"
    assert slugify("one__two...three") == "one-two-three"


@pytest.mark.severity("major")
def test_strips_leading_and_trailing_separators():
    assert slugify("  --Hello--  ") == "hello"
    assert slugify("!Rock & Roll!") == "rock-roll"


@pytest.mark.severity("major")
def test_punctuation_and_non_ascii_are_separators():
    assert slugify("C'est la vie") == "c-est-la-vie"
    assert slugify("café au lait") == "caf-au-lait"


@pytest.mark.severity("minor")
def test_keeps_digits():
    assert slugify("Python 3.12 release") == "python-3-12-release"


@pytest.mark.severity("minor")
def test_empty_and_separator_only_input_give_empty_string():
    assert slugify("") == ""
    assert slugify("---") == ""
    assert slugify(" !? ") == ""
