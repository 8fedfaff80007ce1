"""Local repositories standing in for a GitHub's: a git config of `url.<path>.insteadOf`.

The worker clones every repository from the configured GitHub (shared.github.urls.clone_url).
The embedded stack's GitHub is the emulator, which serves no git: a git config file rewrites
each of its repository URLs to the local repository behind it, and the worker's git reads it
through `GIT_CONFIG_GLOBAL`, so the mirror code runs unchanged.
"""

from __future__ import annotations

from pathlib import Path


def write_gitconfig(path: Path, repositories: dict[str, Path]) -> None:
    """Write `path`: each URL of `repositories` (url → local repository) cloned from disk.
    The user's own ~/.gitconfig stays included. Written whole and renamed into place."""
    lines = [
        "# Written by rollwright's embedded stack: repository URLs of its GitHub point at local",
        "# repositories. Rewritten whenever a repository is added.",
    ]
    user_config = Path.home() / ".gitconfig"
    if user_config.is_file():
        lines += ["[include]", f"\tpath = {user_config}"]
    for url, git_dir in sorted(repositories.items()):
        lines += [f'[url "{_quote(str(git_dir))}"]', f"\tinsteadOf = {url}"]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def _quote(text: str) -> str:
    """Escape a git config subsection name (inside double quotes)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
