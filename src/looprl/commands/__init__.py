"""Commands that are not one process's own: they read a run store and run env code on the user's machine."""
