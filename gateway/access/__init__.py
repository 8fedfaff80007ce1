"""Who may read the pages: GitHub sign-in (the App's user OAuth flow), signed session
cookies, the bearer token for machines, and GitHub's read permission, cached briefly."""
