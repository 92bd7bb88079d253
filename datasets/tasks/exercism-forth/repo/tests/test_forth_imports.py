def test_module_imports():
    import forth  # noqa: F401
