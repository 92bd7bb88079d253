def test_module_imports():
    import go_counting  # noqa: F401
