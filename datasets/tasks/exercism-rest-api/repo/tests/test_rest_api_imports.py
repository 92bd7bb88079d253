def test_module_imports():
    import rest_api  # noqa: F401
