import textkit


def test_module_imports():
    assert hasattr(textkit, "slugify")


def test_word_count():
    assert textkit.word_count("one two  three\n") == 3
    assert textkit.word_count("") == 0
