def test_module_imports():
    import simple_linked_list  # noqa: F401
