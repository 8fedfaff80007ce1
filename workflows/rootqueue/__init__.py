"""One root's deployment queue: the rules (`queue.RootQueue`) and the workflow around them."""
