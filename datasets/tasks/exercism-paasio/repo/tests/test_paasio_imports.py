def test_module_imports():
    import paasio  # noqa: F401
