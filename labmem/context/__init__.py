"""s14 (part 1): context — compaction that cannot rewrite durable state, verified sources.

Modules::

    compaction  compact_context: four layers over a copy of the messages; durable facts
                and pending items bypass the summarizer; render_durable_context;
                close_tool_pairs: the rule that keeps every tool_use with its tool_result;
                compaction_steps / outline_messages: the view after each layer, and what
                each layer truncated, deduplicated, pruned or summarized
    sources     SourcePointerResolver: re-resolve every source pointer from its owner
                (the s09 transcript, the s13 artifacts) on each prompt assembly

Importing this package does no I/O.
"""

from labmem.context.compaction import (
    LAYER_ACTIONS,
    LAYERS,
    CompactionError,
    CompactionPolicy,
    CompactionResult,
    DurableContextState,
    DurableFact,
    LayerStep,
    MessageOutline,
    MessageViewLimitExceeded,
    PendingItem,
    RetrievalEvidence,
    ToolProtocolError,
    close_tool_pairs,
    compact_context,
    compaction_steps,
    estimate_messages_tokens,
    outline_messages,
    render_durable_context,
    run_layer,
    validate_tool_protocol,
)
from labmem.context.sources import STATUSES, SourcePointerResolver, SourceResolution

__all__ = [
    "LAYERS", "CompactionError", "CompactionPolicy", "CompactionResult", "DurableContextState",
    "DurableFact", "MessageViewLimitExceeded", "PendingItem", "RetrievalEvidence",
    "ToolProtocolError", "close_tool_pairs", "compact_context", "estimate_messages_tokens",
    "render_durable_context", "run_layer", "validate_tool_protocol",
    "LAYER_ACTIONS", "LayerStep", "MessageOutline", "compaction_steps", "outline_messages",
    "STATUSES", "SourcePointerResolver", "SourceResolution",
]
