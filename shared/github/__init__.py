"""GitHub through the App: the REST client, the git data API, output limits."""
