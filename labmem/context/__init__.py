"""s14 (part 1): context — compaction that cannot rewrite durable state, verified sources.

Modules::

    compaction  compact_context: four layers over a copy of the messages, the tool
                protocol, close_tool_pairs (the rule that keeps every tool_use with its
                tool_result), run_layer (one layer alone)
    durable     the durable state: confirmed facts, pending items and retrieval evidence,
                each with a source pointer; it never enters a layer or the summarizer
    sources     SourcePointerResolver: re-resolve every source pointer from its owner
                (the s09 transcript, the s13 artifacts) on each prompt assembly, and
                render_durable_context, which prints each item with what its source
                resolved to for this assembly
    trace       display helpers: compaction_steps (the view after each layer, and what
                each layer truncated, deduplicated, pruned or summarized) and
                outline_messages

Importing this package does no I/O.
"""

from labmem.context.compaction import (
    LAYER_ACTIONS,
    LAYERS,
    CompactionError,
    CompactionPolicy,
    CompactionResult,
    MessageViewLimitExceeded,
    ToolProtocolError,
    close_tool_pairs,
    compact_context,
    estimate_messages_tokens,
    run_layer,
    validate_tool_protocol,
)
from labmem.context.durable import (
    DurableContextState,
    DurableFact,
    PendingItem,
    RetrievalEvidence,
)
from labmem.context.sources import (
    STATUSES,
    SourcePointerResolver,
    SourceResolution,
    render_durable_context,
)
from labmem.context.trace import LayerStep, MessageOutline, compaction_steps, outline_messages

__all__ = [
    "LAYERS", "CompactionError", "CompactionPolicy", "CompactionResult", "DurableContextState",
    "DurableFact", "MessageViewLimitExceeded", "PendingItem", "RetrievalEvidence",
    "ToolProtocolError", "close_tool_pairs", "compact_context", "estimate_messages_tokens",
    "render_durable_context", "run_layer", "validate_tool_protocol",
    "LAYER_ACTIONS", "LayerStep", "MessageOutline", "compaction_steps", "outline_messages",
    "STATUSES", "SourcePointerResolver", "SourceResolution",
]
