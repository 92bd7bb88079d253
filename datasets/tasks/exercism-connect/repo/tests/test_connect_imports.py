def test_module_imports():
    import connect  # noqa: F401
