def test_module_imports():
    import bowling  # noqa: F401
