def test_module_imports():
    import two_bucket  # noqa: F401
