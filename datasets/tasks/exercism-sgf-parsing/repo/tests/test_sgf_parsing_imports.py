def test_module_imports():
    import sgf_parsing  # noqa: F401
