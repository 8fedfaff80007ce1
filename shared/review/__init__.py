"""What a reviewer reads: render diffs, noise rules, PR previews and their Markdown."""
