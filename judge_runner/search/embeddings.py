"""The search's embeddings: moved to the neutral :mod:`judge_runner.embedding` (the heuristic judge uses
them too) and re-exported here, so ``from judge_runner.search.embeddings import ...`` keeps working.
The search asks :func:`~judge_runner.embedding.get_embedder` (``shared_embedder``) for its default."""

from judge_runner.embedding import (  # noqa: F401
    BATCH_SIZE,
    DIMENSION,
    MODEL_NAME,
    Embedder,
    EmbeddingModelError,
    HashEmbedder,
    MiniLMEmbedder,
    TextEmbedder,
    get_embedder,
    shared_embedder,
)
