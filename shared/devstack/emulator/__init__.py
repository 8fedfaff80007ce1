"""A stateful GitHub emulator over HTTP for the dev stack and the tests."""
