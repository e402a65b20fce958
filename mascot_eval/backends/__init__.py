"""Model backends: one async chat interface over hosted APIs, vLLM, transformers and the embedded model.

Callers (systems, judges, the trainer) use :func:`mascot_eval.backends.client.get_client` and
``await client.chat(messages, params, tag=...)``; the client adds the shared response cache,
concurrency and rate limits, retries and usage/cost accounting around a :class:`Backend`.
"""

from .base import Backend, ChatRequest, ChatResponse, GenerationParams, Usage  # noqa: F401
