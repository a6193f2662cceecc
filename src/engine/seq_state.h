#pragma once
// llama.cpp's per-sequence KV state layout <-> position-ordered KvBlocks.
//
// This file is the only place that knows the byte layout written by
// llama_state_seq_get_data_ext (llama.cpp src/llama-kv-cache.cpp,
// state_write / state_write_meta / state_write_data, pinned commit de3ff81):
//
//   state   := u32 magic (0xaf143cd8), i32 seq_id, section+
//                                            (llama_context::state_seq_get_data)
//   section+:                                one per KV cache: a plain model has
//                                            one; a hybrid sliding-window model
//                                            (llama_kv_cache_iswa) has base then swa
//   section := u32 n_stream, stream[n_stream]
//   stream  := u32 cell_count, [cells, data]  (cells+data only if cell_count > 0)
//   cells   := cell_count x (i32 pos, u32 n_seq_id (=1), i32 seq_id)
//   data    := u32 v_trans (=0 with flash attention), u32 n_layer,
//              n_layer x (i32 k_type, u64 k_row_bytes, cell_count rows),
//              [n_layer x (i32 v_type, u64 v_row_bytes, cell_count rows)]
//                                            V is absent for MLA caches
//
// Rows follow cell order, which need not be position order; blocks are in
// position order. Cell extensions (M-RoPE / PLE models) and transposed V
// (flash attention off) are rejected as Unsupported.
//
// Pure byte manipulation: no llama.h here, so it is testable on synthetic bytes.
//
// Hybrid slots: the slots' KV element type may differ from the blocks' (at
// rest): e.g. f16 slots (--slot-kv f16) with q4_0 blocks. A KvLayout names both shapes; export quantizes each slot row to the
// at-rest type, import dequantizes at-rest rows into slot rows
// (engine/kv_row_convert.h, ggml's conversions). Blocks, their bytes and
// their names are the at-rest type's either way. With equal shapes rows are
// copied byte for byte, as before.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "store/kv_block.h"
#include "util/status.h"

namespace agentkv::engine {

// Bumped whenever the mapping between llama.cpp's bytes and KvBlocks changes;
// part of the model fingerprint so old caches are never misread.
inline constexpr uint32_t kEngineLayoutVersion = 1;
inline constexpr uint32_t kLlamaSeqStateMagic = 0xaf143cd8;

// Shape of one KV cache (section) of a model, learned once from a probe export.
struct SectionShape {
  uint32_t n_layer = 0;
  bool has_v = true;                  // false for MLA (K holds the latent)
  std::vector<int32_t> k_type;        // ggml_type per layer
  std::vector<uint64_t> k_row_bytes;  // per layer
  std::vector<int32_t> v_type;        // empty when !has_v
  std::vector<uint64_t> v_row_bytes;
  // 0 = keeps every position; otherwise a sliding window: after a sequence
  // of n tokens only positions p with (n-1) - p < window are kept/exported.
  uint32_t swa_window = 0;

  bool operator==(const SectionShape&) const = default;
};

struct StateShape {
  std::vector<SectionShape> sections;
  // Bytes of K+V rows for one position across all non-windowed sections.
  uint64_t RowBytesPerToken() const;

  bool operator==(const StateShape&) const = default;
};

// The slots' layout (what llama.cpp's state bytes hold) and the blocks'
// layout (at rest). REQUIRES: the same sections, layers, windows and row
// widths (values per row); only element types and row bytes may differ, and
// both types convertible (KvRowTypeConvertible) when they do
// (CheckConvertible). Both shapes must outlive the layout.
struct KvLayout {
  const StateShape& slot;
  const StateShape& rest;
  // One shape for both: rows are copied byte for byte.
  static KvLayout Same(const StateShape& shape) { return {shape, shape}; }
};

// The at-rest shape for a slot shape: every layer's K rows in ggml type
// rest_k and V rows in rest_v, same widths. Unsupported when a row width is
// not a whole number of the at-rest type's blocks or a type is not convertible.
Result<StateShape> AtRestShape(const StateShape& slot, int32_t rest_k, int32_t rest_v);

// One section of a parsed state: cell positions and, per layer, where its
// rows live in the source buffer.
struct ParsedSection {
  std::vector<int32_t> pos;            // per cell, in cell order
  std::vector<const uint8_t*> k_rows;  // per layer: first row
  std::vector<const uint8_t*> v_rows;  // per layer (empty when !has_v)
};

// Learns a StateShape from an export of a sequence (typically a one-token probe).
// For each section tries "with V" first, then "without V" (MLA). The caller
// fills swa_window. REQUIRES: the state holds at least one cell per section.
Result<StateShape> InferStateShape(std::span<const uint8_t> state);

// Parses a state against a known shape. The result points into `state`, which
// must outlive it. Fails with Corruption on any mismatch (never reads past the end).
Result<std::vector<ParsedSection>> ParseState(std::span<const uint8_t> state, const StateShape& shape);

// Converts a parsed state of a sequence of n_tokens positions [0, n_tokens)
// into ceil(n_tokens / 256) blocks. Tensor names: "c<section>.l<layer>.k|v".
// Fails if a non-windowed section does not hold exactly positions [0, n_tokens).
// With first_block > 0 only blocks [first_block, ceil(n_tokens / 256)) are
// built (the caller already holds the earlier ones), and the state may lack
// the positions before them (an export of the sequence's tail,
// Context::ExportSlotBlocks); what it holds is still validated. Large states
// are copied on up to n_threads threads.
// With a KvLayout the state is parsed against layout.slot and the blocks are
// built in layout.rest (rows converted when the two differ).
Result<std::vector<KvBlock>> StateToBlocks(std::span<const uint8_t> state, const KvLayout& layout,
                                           uint32_t n_tokens, uint32_t first_block = 0, int n_threads = 1);
Result<std::vector<KvBlock>> StateToBlocks(std::span<const uint8_t> state, const StateShape& shape,
                                           uint32_t n_tokens, uint32_t first_block = 0, int n_threads = 1);

// The longest prefix n <= n_tokens of `blocks` that can be restored: every
// non-windowed section has rows for [0, n) and every windowed section has rows
// for [n - W + 1, n), the window position n attends to (an export of n tokens
// holds one more, so n - 1 is restorable too). Blocks must be consecutive from index 0.
uint32_t RestorablePrefix(const std::vector<const KvBlock*>& blocks, const StateShape& shape,
                          uint32_t n_tokens);

// An upper bound of StateBytesForBlocks for any blocks of up to n_tokens
// positions (and of an export of a slot that long): every section holding
// every position. For allocating a staging buffer once, up front.
uint64_t MaxStateBytes(const StateShape& shape, uint32_t n_tokens, uint32_t n_stream);

// The tensor payloads of the blocks an agent of n_tokens positions has in
// `shape` (at rest), counting its last block as full: (bytes, count) pairs,
// one per distinct size. A windowed section's tensors are counted for the
// blocks its window can reach (ceil(window / 256) + 1). What a read of such
// an agent allocates (util/warm_memory.h's targets).
std::vector<std::pair<size_t, size_t>> BlockTensorSizes(const StateShape& shape, uint32_t n_tokens);

// Exact size of the state WriteBlocksState writes for these blocks.
// With a KvLayout: blocks in layout.rest, state in layout.slot.
uint64_t StateBytesForBlocks(const std::vector<const KvBlock*>& blocks, const KvLayout& layout, uint32_t n_tokens,
                            uint32_t n_stream);
uint64_t StateBytesForBlocks(const std::vector<const KvBlock*>& blocks, const StateShape& shape, uint32_t n_tokens,
                            uint32_t n_stream);
// Writes llama.cpp state bytes for positions [0, n_tokens) of `blocks` into
// dst (REQUIRES dst.size() == StateBytesForBlocks(...)); no allocation, so a
// caller can reuse one buffer for every restore. Large states are copied (or
// converted: blocks in layout.rest, state rows in layout.slot) on up to
// n_threads threads (the caller's included).
Status WriteBlocksState(const std::vector<const KvBlock*>& blocks, const KvLayout& layout, uint32_t n_tokens,
                        uint32_t n_stream, std::span<uint8_t> dst, int n_threads = 1);
Status WriteBlocksState(const std::vector<const KvBlock*>& blocks, const StateShape& shape, uint32_t n_tokens,
                        uint32_t n_stream, std::span<uint8_t> dst, int n_threads = 1);

// WriteBlocksState in two steps, for a caller that uses the state while its
// rows are still being written (Context::ImportSlotBlocks overlaps the rows'
// copy with llama.cpp's copy to the device): Start() checks the arguments
// (the errors of WriteBlocksState) and writes every byte of dst except the
// tensor rows; CopyRows(i), for each i in [0, n_row_copies()), then writes
// dst[RowBytes(i)], in any order and from any threads (each i once). The
// ranges ascend with i, do not overlap, and with the headers tile dst.
// `blocks`, the shapes `layout` refers to, and dst must outlive the writer.
class BlocksStateWriter {
 public:
  static Result<BlocksStateWriter> Start(const std::vector<const KvBlock*>& blocks, const KvLayout& layout,
                                         uint32_t n_tokens, uint32_t n_stream, std::span<uint8_t> dst);

  // For a state whose blocks are not all at hand yet (a disk read lands each
  // block as its file comes in, sched/read_landing.h): writes every byte of
  // dst but the rows, for positions [0, n_tokens), from the layout alone;
  // then CopyBlock writes each block's rows as it comes. CopyRows must not be
  // called. Unsupported when a section has a sliding window (which positions
  // it holds depends on the blocks). REQUIRES dst.size() ==
  // MaxStateBytes(layout.slot, n_tokens, n_stream) (exact without windows). The shapes `layout`
  // refers to, and dst, must outlive the writer.
  static Result<BlocksStateWriter> StartWithoutBlocks(const KvLayout& layout, uint32_t n_tokens, uint32_t n_stream,
                                                      std::span<uint8_t> dst);

  size_t n_row_copies() const { return copies_.size(); }
  // Byte range [first, second) of dst that CopyRows(i) writes.
  std::pair<size_t, size_t> RowBytes(size_t i) const;
  // The first row copy whose bytes end after dst offset `offset`
  // (n_row_copies() if none): the ranges ascend, so the copies overlapping
  // [offset, offset + n) are it and those after it that start below offset + n.
  size_t FirstRowCopyEndingAfter(size_t offset) const;
  // Which cache section and layer the rows of copy i belong to (every
  // section's K rows, layer by layer, then its V rows: llama.cpp's order).
  size_t RowSection(size_t i) const { return copies_[i].section; }
  uint32_t RowLayer(size_t i) const { return copies_[i].layer; }
  size_t n_sections() const { return layout_.slot.sections.size(); }
  void CopyRows(size_t i) const;
  // Writes the rows of block b (layout.rest) for its positions below
  // n_tokens, converted to layout.slot's types. InvalidArgument, nothing
  // written, unless b holds every layer's rows for all of those positions.
  // Thread-safe for distinct blocks. After StartWithoutBlocks only.
  Status CopyBlock(const KvBlock& b) const;
  // CopyBlock for one of b's tensors, `t` (b's first_pos and n_tokens
  // place it): writes its share of row copy i, whose tensor it must be
  // (RowTensorName(i)). InvalidArgument, nothing written, unless t holds
  // those rows. Thread-safe for distinct (i, b). After StartWithoutBlocks only.
  Status CopyBlockTensor(size_t i, const KvBlock& b, const KvTensor& t) const;
  // The name of the block tensor that row copy i's rows come from.
  std::string RowTensorName(size_t i) const;

 private:
  struct RowCopy {
    size_t offset;  // in dst
    size_t section;
    uint32_t layer;
    bool is_k;
    uint32_t lo, hi;  // positions
  };
  BlocksStateWriter(const std::vector<const KvBlock*>& blocks, const KvLayout& layout, std::span<uint8_t> dst)
      : blocks_(&blocks), layout_(layout), dst_(dst) {}
  // Headers for positions [0, n_tokens) of `blocks` (which decide the
  // windowed sections' ranges), noting each row copy; no row written.
  static Result<BlocksStateWriter> WriteHeaders(const std::vector<const KvBlock*>& blocks, const KvLayout& layout,
                                                uint32_t n_tokens, uint32_t n_stream, std::span<uint8_t> dst);
  void CopyPositions(const RowCopy& c, const KvTensor& t, uint32_t lo, uint32_t hi) const;
  uint64_t RowBytesPerPosition(const RowCopy& c) const;

  const std::vector<const KvBlock*>* blocks_;
  KvLayout layout_;
  std::span<uint8_t> dst_;
  std::vector<RowCopy> copies_;
};

}  // namespace agentkv::engine
