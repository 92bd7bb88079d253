def test_module_imports():
    import react  # noqa: F401
