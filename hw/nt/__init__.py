"""Network tasks: the NT contract (task.py) and the library."""
