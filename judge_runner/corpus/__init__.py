"""Reading a knowledge-base folder: which files count, how they decode, how they split into chunks."""
