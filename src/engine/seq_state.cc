#include "engine/seq_state.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "engine/kv_row_convert.h"
#include "util/parallel.h"

namespace agentkv::engine {
namespace {

// Below this many bytes a copy is not worth waking other threads for.
constexpr size_t kParallelCopyBytes = 4u << 20;

// Bounds-checked little-endian reader over a byte span.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  bool Read(T* out) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // Returns a pointer to the next n bytes and skips them, or nullptr.
  const uint8_t* Skip(uint64_t n) {
    if (n > bytes_.size() - pos_) return nullptr;
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  bool done() const { return pos_ == bytes_.size(); }
  size_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

Status Bad(const std::string& what) { return Status::Corruption("kv state: " + what); }

// Whether a KvLayout's two shapes describe the same rows (KvLayout's REQUIRES).
Status CheckLayout(const KvLayout& layout) {
  const auto& a = layout.slot.sections;
  const auto& b = layout.rest.sections;
  bool same = a.size() == b.size();
  for (size_t si = 0; same && si < a.size(); ++si) {
    same = a[si].n_layer == b[si].n_layer && a[si].has_v == b[si].has_v && a[si].swa_window == b[si].swa_window;
    for (uint32_t l = 0; same && l < a[si].n_layer; ++l) {
      same = KvRowWidth(a[si].k_type[l], a[si].k_row_bytes[l]) == KvRowWidth(b[si].k_type[l], b[si].k_row_bytes[l]) &&
             (!a[si].has_v ||
              KvRowWidth(a[si].v_type[l], a[si].v_row_bytes[l]) == KvRowWidth(b[si].v_type[l], b[si].v_row_bytes[l]));
    }
  }
  return same ? Status::OK() : Status::InvalidArgument("kv layout: slot and at-rest shapes differ beyond element types");
}

// Whether any layer's rows change type between the slot and the blocks.
bool Converts(const KvLayout& layout) { return &layout.slot != &layout.rest && !(layout.slot == layout.rest); }

// Conversion costs ~10x a memcpy per byte: worth threads sooner.
size_t ParallelThreshold(const KvLayout& layout) { return Converts(layout) ? kParallelCopyBytes / 8 : kParallelCopyBytes; }

// Parses one section. With `learn`, fills *shape from the bytes (has_v as
// given); otherwise checks the bytes against *shape.
Status ParseSection(Reader& r, SectionShape* shape, bool learn, ParsedSection* out) {
  uint32_t n_stream = 0;
  if (!r.Read(&n_stream) || n_stream == 0 || n_stream > 4096) return Bad("bad stream count");
  bool seen = false;
  for (uint32_t s = 0; s < n_stream; ++s) {
    uint32_t cell_count = 0;
    if (!r.Read(&cell_count)) return Bad("truncated cell count");
    if (cell_count == 0) continue;
    if (seen) return Bad("sequence spread over two streams");
    seen = true;
    out->pos.resize(cell_count);
    for (uint32_t i = 0; i < cell_count; ++i) {
      uint32_t n_seq = 0;
      int32_t seq = 0;
      if (!r.Read(&out->pos[i]) || !r.Read(&n_seq) || n_seq != 1 || !r.Read(&seq)) {
        return Bad("bad cell metadata (cell extensions are unsupported)");
      }
    }
    uint32_t v_trans = 0, n_layer = 0;
    if (!r.Read(&v_trans) || !r.Read(&n_layer)) return Bad("truncated data header");
    if (v_trans != 0) return Status::Unsupported("kv state: transposed V (flash attention off)");
    if (learn) {
      shape->n_layer = n_layer;
    } else if (n_layer != shape->n_layer) {
      return Bad("layer count " + std::to_string(n_layer) + " != " + std::to_string(shape->n_layer));
    }
    auto read_rows = [&](bool is_k, std::vector<const uint8_t*>* rows) -> Status {
      auto& types = is_k ? shape->k_type : shape->v_type;
      auto& row_bytes = is_k ? shape->k_row_bytes : shape->v_row_bytes;
      if (learn) {
        types.assign(n_layer, 0);
        row_bytes.assign(n_layer, 0);
      }
      rows->resize(n_layer);
      for (uint32_t l = 0; l < n_layer; ++l) {
        int32_t type = 0;
        uint64_t rb = 0;
        if (!r.Read(&type) || !r.Read(&rb)) return Bad("truncated layer header");
        if (rb == 0 || rb > (1u << 24) || type < 0 || type > 1000) return Bad("implausible layer header");
        if (learn) {
          types[l] = type;
          row_bytes[l] = rb;
        } else if (type != types[l] || rb != row_bytes[l]) {
          return Bad("layer " + std::to_string(l) + " type/row size differs from the model's");
        }
        (*rows)[l] = r.Skip(rb * cell_count);
        if ((*rows)[l] == nullptr) return Bad("truncated rows");
      }
      return Status::OK();
    };
    AGENTKV_RETURN_IF_ERROR(read_rows(true, &out->k_rows));
    if (shape->has_v) AGENTKV_RETURN_IF_ERROR(read_rows(false, &out->v_rows));
  }
  if (!seen) return Bad("section holds no cells of the sequence");
  return Status::OK();
}

std::string TensorName(size_t section, uint32_t layer, bool is_k) {
  return "c" + std::to_string(section) + ".l" + std::to_string(layer) + (is_k ? ".k" : ".v");
}

// Positions a section must hold to restore a sequence of n tokens and go on
// from it: the next token (position n) attends, in a window of W, to
// positions p with n - p < W (llama.cpp's standard sliding window, masked
// when p1 - p0 >= n_swa), i.e. [n - W + 1, n). An export of n tokens holds
// [n - W, n), one more: enough to restore n - 1 tokens and re-feed the last
// one (EXACT matches, and extends whose last token re-tokenizes).
std::pair<uint32_t, uint32_t> RequiredRange(const SectionShape& s, uint32_t n) {
  if (s.swa_window == 0 || n + 1 <= s.swa_window) return {0, n};
  return {n + 1 - s.swa_window, n};
}

}  // namespace

uint64_t StateShape::RowBytesPerToken() const {
  uint64_t total = 0;
  for (const auto& s : sections) {
    if (s.swa_window != 0) continue;
    for (auto b : s.k_row_bytes) total += b;
    for (auto b : s.v_row_bytes) total += b;
  }
  return total;
}

// Reads the u32 magic + i32 seq id that precede the sections.
static Status ReadHeader(Reader& r) {
  uint32_t magic = 0;
  int32_t seq = 0;
  if (!r.Read(&magic) || magic != kLlamaSeqStateMagic || !r.Read(&seq)) return Bad("bad magic");
  return Status::OK();
}

Result<StateShape> InferStateShape(std::span<const uint8_t> state) {
  StateShape shape;
  Reader r(state);
  AGENTKV_RETURN_IF_ERROR(ReadHeader(r));
  while (!r.done()) {
    // Try with V, then without (MLA); keep the reading that lets the rest parse.
    bool parsed = false;
    for (bool has_v : {true, false}) {
      Reader attempt = r;
      SectionShape s;
      s.has_v = has_v;
      ParsedSection ps;
      if (!ParseSection(attempt, &s, /*learn=*/true, &ps).ok()) continue;
      // The next bytes must start a section (or be the end).
      Reader probe = attempt;
      uint32_t next_streams = 0;
      if (!attempt.done() && (!probe.Read(&next_streams) || next_streams == 0 || next_streams > 4096)) continue;
      shape.sections.push_back(std::move(s));
      r = attempt;
      parsed = true;
      break;
    }
    if (!parsed) return Bad("cannot infer the state layout");
  }
  if (shape.sections.empty()) return Bad("empty state");
  return shape;
}

Result<std::vector<ParsedSection>> ParseState(std::span<const uint8_t> state, const StateShape& shape) {
  std::vector<ParsedSection> out(shape.sections.size());
  Reader r(state);
  AGENTKV_RETURN_IF_ERROR(ReadHeader(r));
  for (size_t i = 0; i < shape.sections.size(); ++i) {
    SectionShape s = shape.sections[i];
    AGENTKV_RETURN_IF_ERROR(ParseSection(r, &s, /*learn=*/false, &out[i]));
  }
  if (!r.done()) return Bad("trailing bytes after the last section");
  return out;
}

Result<StateShape> AtRestShape(const StateShape& slot, int32_t rest_k, int32_t rest_v) {
  StateShape rest = slot;
  for (size_t si = 0; si < rest.sections.size(); ++si) {
    SectionShape& s = rest.sections[si];
    for (int kv = 0; kv < (s.has_v ? 2 : 1); ++kv) {
      const bool is_k = kv == 0;
      auto& types = is_k ? s.k_type : s.v_type;
      auto& row_bytes = is_k ? s.k_row_bytes : s.v_row_bytes;
      const int32_t to = is_k ? rest_k : rest_v;
      for (uint32_t l = 0; l < s.n_layer; ++l) {
        if (types[l] == to) continue;
        const uint64_t width = KvRowWidth(types[l], row_bytes[l]);
        const uint64_t rb = KvRowBytesFor(to, width);
        if (width == 0 || rb == 0 || !KvRowTypeConvertible(types[l]) || !KvRowTypeConvertible(to)) {
          return Status::Unsupported("kv layout: section " + std::to_string(si) + " layer " + std::to_string(l) +
                                     (is_k ? " K" : " V") + " rows of ggml type " + std::to_string(types[l]) +
                                     " cannot be stored as ggml type " + std::to_string(to));
        }
        types[l] = to;
        row_bytes[l] = rb;
      }
    }
  }
  return rest;
}

Result<std::vector<KvBlock>> StateToBlocks(std::span<const uint8_t> state, const StateShape& shape,
                                           uint32_t n_tokens, uint32_t first_block, int n_threads) {
  return StateToBlocks(state, KvLayout::Same(shape), n_tokens, first_block, n_threads);
}

Result<std::vector<KvBlock>> StateToBlocks(std::span<const uint8_t> state, const KvLayout& layout,
                                           uint32_t n_tokens, uint32_t first_block, int n_threads) {
  const StateShape& shape = layout.slot;
  if (Converts(layout)) AGENTKV_RETURN_IF_ERROR(CheckLayout(layout));
  AGENTKV_ASSIGN_OR_RETURN(auto parsed, ParseState(state, shape));
  const uint32_t n_blocks = (n_tokens + kBlockTokens - 1) / kBlockTokens;
  first_block = std::min(first_block, n_blocks);
  std::vector<KvBlock> blocks(n_blocks - first_block);
  for (uint32_t b = first_block; b < n_blocks; ++b) {
    blocks[b - first_block].index = b;
    blocks[b - first_block].n_tokens = std::min(kBlockTokens, n_tokens - b * kBlockTokens);
  }
  struct TensorCopy {
    size_t block, tensor, section;
    const uint8_t* src;  // the layer's first row in the state
    int32_t src_type;    // slot rows: ggml type and bytes per row
    uint64_t src_row_bytes;
    int32_t dst_type;    // block rows (at rest)
  };
  std::vector<TensorCopy> copies;
  std::vector<std::vector<int64_t>> cell_of_by_section;  // per section: position -> cell, -1 if absent
  for (size_t si = 0; si < parsed.size(); ++si) {
    const SectionShape& s = shape.sections[si];
    const ParsedSection& ps = parsed[si];
    // cell index for each position, -1 when absent
    std::vector<int64_t> cell_of(n_tokens, -1);
    for (size_t c = 0; c < ps.pos.size(); ++c) {
      const int32_t p = ps.pos[c];
      if (p < 0 || static_cast<uint32_t>(p) >= n_tokens) return Bad("cell position outside the sequence");
      if (cell_of[p] != -1) return Bad("duplicate cell position");
      cell_of[p] = static_cast<int64_t>(c);
    }
    auto [need_lo, need_hi] = RequiredRange(s, n_tokens);
    need_lo = std::max(need_lo, std::min(need_hi, first_block * kBlockTokens));  // earlier rows: not needed
    for (uint32_t p = need_lo; p < need_hi; ++p) {
      if (cell_of[p] == -1) return Bad("position " + std::to_string(p) + " missing in section " + std::to_string(si));
    }
    for (size_t bi = 0; bi < blocks.size(); ++bi) {
      KvBlock& block = blocks[bi];
      // rows present in this block: a contiguous run (sections hold a suffix window or everything)
      uint32_t lo = block.first_pos(), hi = block.first_pos() + block.n_tokens;
      while (lo < hi && cell_of[lo] == -1) ++lo;
      uint32_t end = lo;
      while (end < hi && cell_of[end] != -1) ++end;
      if (end < hi && std::any_of(cell_of.begin() + end, cell_of.begin() + hi, [](int64_t c) { return c != -1; })) {
        return Bad("section positions are not contiguous");
      }
      if (lo == end) continue;
      const SectionShape& rest = layout.rest.sections[si];
      for (int kv = 0; kv < (s.has_v ? 2 : 1); ++kv) {
        const bool is_k = kv == 0;
        for (uint32_t l = 0; l < s.n_layer; ++l) {
          const uint64_t rb = is_k ? s.k_row_bytes[l] : s.v_row_bytes[l];
          KvTensor t;
          t.name = TensorName(si, l, is_k);
          t.row_bytes = static_cast<uint32_t>(is_k ? rest.k_row_bytes[l] : rest.v_row_bytes[l]);
          t.first_pos = lo;
          t.n_rows = end - lo;  // data: filled below
          block.tensors.push_back(std::move(t));
          copies.push_back({bi, block.tensors.size() - 1, si, is_k ? ps.k_rows[l] : ps.v_rows[l],
                            is_k ? s.k_type[l] : s.v_type[l], rb, is_k ? rest.k_type[l] : rest.v_type[l]});
        }
      }
    }
    cell_of_by_section.push_back(std::move(cell_of));
  }
  // The row copies (nearly all the bytes) run in parallel, one tensor each;
  // each task allocates its tensor's bytes itself (no zero fill, and the
  // page faults of fresh memory are spread over the threads too).
  size_t total = 0;
  for (const auto& c : copies) {
    const KvTensor& t = blocks[c.block].tensors[c.tensor];
    total += uint64_t{t.n_rows} * t.row_bytes;
  }
  ParallelFor(copies.size(), total >= ParallelThreshold(layout) ? n_threads : 1, [&](size_t i) {
    const TensorCopy& c = copies[i];
    KvTensor& t = blocks[c.block].tensors[c.tensor];
    const std::vector<int64_t>& cell_of = cell_of_by_section[c.section];
    const uint64_t rb = c.src_row_bytes;
    const uint32_t end = t.first_pos + t.n_rows;
    const bool convert = c.src_type != c.dst_type;
    if (convert) {
      t.data.resize(uint64_t{t.row_bytes} * t.n_rows);
    } else {
      t.data.reserve(rb * t.n_rows);
    }
    // One append (or conversion) per run of consecutive cells (the usual
    // layout: a slot's cells are allocated in position order, so one run).
    for (uint32_t p = t.first_pos; p < end;) {
      uint32_t q = p + 1;
      while (q < end && cell_of[q] == cell_of[q - 1] + 1) ++q;
      const uint8_t* from = c.src + cell_of[p] * rb;
      if (convert) {
        ConvertKvRows(c.src_type, rb, c.dst_type, from, t.data.data() + uint64_t{p - t.first_pos} * t.row_bytes, q - p);
      } else {
        t.data.insert(t.data.end(), from, from + (q - p) * rb);
      }
      p = q;
    }
  });
  return blocks;
}

namespace {

// Finds a tensor by name in a block; nullptr if absent.
const KvTensor* FindTensor(const KvBlock& b, const std::string& name) {
  for (const auto& t : b.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Positions [lo, hi) for which every layer's K (and V) of section si has a
// well-formed row in block b; {0,0} if any tensor is missing or malformed.
std::pair<uint32_t, uint32_t> BlockRange(const KvBlock& b, const SectionShape& s, size_t si) {
  uint32_t lo = b.first_pos(), hi = b.first_pos() + b.n_tokens;
  for (int kv = 0; kv < (s.has_v ? 2 : 1); ++kv) {
    for (uint32_t l = 0; l < s.n_layer; ++l) {
      const KvTensor* t = FindTensor(b, TensorName(si, l, kv == 0));
      const uint64_t rb = kv == 0 ? s.k_row_bytes[l] : s.v_row_bytes[l];
      if (t == nullptr || t->row_bytes != rb || t->data.size() != uint64_t{t->n_rows} * rb) return {0, 0};
      lo = std::max(lo, t->first_pos);
      hi = std::min(hi, t->first_pos + t->n_rows);
    }
  }
  if (lo >= hi) return {0, 0};
  return {lo, hi};
}

}  // namespace

namespace {

// Positions of section si written for a restore of n tokens: the required
// range, widened by the one window position an export of n tokens also holds
// when the blocks have it, so that a restored slot re-exports like the
// original and can still be cut by one token.
std::pair<uint32_t, uint32_t> WriteRange(const std::vector<const KvBlock*>& blocks, const SectionShape& s, size_t si,
                                         uint32_t n) {
  auto [lo, hi] = RequiredRange(s, n);
  if (s.swa_window == 0 || lo == 0 || (lo - 1) / kBlockTokens >= blocks.size()) return {lo, hi};
  const KvBlock& b = *blocks[(lo - 1) / kBlockTokens];
  if (b.index != (lo - 1) / kBlockTokens) return {lo, hi};
  auto [have_lo, have_hi] = BlockRange(b, s, si);  // rows every layer has
  if (have_lo <= lo - 1 && lo - 1 < have_hi) --lo;
  return {lo, hi};
}

}  // namespace

uint32_t RestorablePrefix(const std::vector<const KvBlock*>& blocks, const StateShape& shape,
                          uint32_t n_tokens) {
  // Consecutive blocks from 0 with the right sizes.
  uint32_t avail = 0;
  size_t n_blocks = 0;
  for (; n_blocks < blocks.size(); ++n_blocks) {
    const KvBlock& b = *blocks[n_blocks];
    if (b.index != n_blocks || b.n_tokens == 0 || b.n_tokens > kBlockTokens) break;
    avail += b.n_tokens;
    if (!b.full()) {
      ++n_blocks;
      break;
    }
  }
  uint32_t n = std::min(n_tokens, avail);
  for (size_t si = 0; si < shape.sections.size() && n > 0; ++si) {
    const SectionShape& s = shape.sections[si];
    // The run of present positions: [run_lo, run_hi), contiguous over blocks.
    uint32_t run_lo = 0, run_hi = 0;
    bool in_run = false;
    for (size_t i = 0; i < n_blocks; ++i) {
      auto [lo, hi] = BlockRange(*blocks[i], s, si);
      if (lo == hi) {
        if (in_run) break;
        continue;
      }
      if (!in_run) {
        run_lo = lo;
        in_run = true;
      } else if (lo != run_hi) {
        break;
      }
      run_hi = hi;
      if (hi != blocks[i]->first_pos() + blocks[i]->n_tokens) break;
    }
    if (!in_run) return 0;
    // Largest n' <= n whose required range lies inside the run.
    uint32_t cand = std::min(n, run_hi);
    auto [need_lo, need_hi] = RequiredRange(s, cand);
    n = need_lo >= run_lo ? cand : 0;
    (void)need_hi;
  }
  return n;
}

uint64_t MaxStateBytes(const StateShape& shape, uint32_t n_tokens, uint32_t n_stream) {
  uint64_t size = 8;  // magic + seq id
  for (const SectionShape& s : shape.sections) {
    size += 8 + uint64_t{n_tokens} * 12 + 8 + 4ull * (n_stream - 1);
    for (uint32_t l = 0; l < s.n_layer; ++l) {
      size += 12 + uint64_t{n_tokens} * s.k_row_bytes[l];
      if (s.has_v) size += 12 + uint64_t{n_tokens} * s.v_row_bytes[l];
    }
  }
  return size;
}

std::vector<std::pair<size_t, size_t>> BlockTensorSizes(const StateShape& shape, uint32_t n_tokens) {
  const size_t n_blocks = (size_t{n_tokens} + kBlockTokens - 1) / kBlockTokens;
  std::map<size_t, size_t> count;  // bytes -> tensors
  for (const SectionShape& s : shape.sections) {
    const size_t blocks =
        s.swa_window == 0 ? n_blocks : std::min(n_blocks, (size_t{s.swa_window} + kBlockTokens - 1) / kBlockTokens + 1);
    for (uint32_t l = 0; l < s.n_layer; ++l) {
      count[s.k_row_bytes[l] * kBlockTokens] += blocks;
      if (s.has_v) count[s.v_row_bytes[l] * kBlockTokens] += blocks;
    }
  }
  return {count.begin(), count.end()};
}

uint64_t StateBytesForBlocks(const std::vector<const KvBlock*>& blocks, const StateShape& shape, uint32_t n_tokens,
                            uint32_t n_stream) {
  return StateBytesForBlocks(blocks, KvLayout::Same(shape), n_tokens, n_stream);
}

uint64_t StateBytesForBlocks(const std::vector<const KvBlock*>& blocks, const KvLayout& layout, uint32_t n_tokens,
                            uint32_t n_stream) {
  const StateShape& shape = layout.slot;
  uint64_t size = 8;  // magic + seq id
  for (size_t si = 0; si < shape.sections.size(); ++si) {
    const SectionShape& s = shape.sections[si];
    auto [lo, hi] = WriteRange(blocks, layout.rest.sections[si], si, n_tokens);
    const uint64_t cells = hi - lo;
    size += 8 + cells * 12 + 8;  // n_stream + cell_count, cells, v_trans + n_layer
    for (uint32_t l = 0; l < s.n_layer; ++l) {
      size += 12 + cells * s.k_row_bytes[l];
      if (s.has_v) size += 12 + cells * s.v_row_bytes[l];
    }
    size += 4ull * (n_stream - 1);
  }
  return size;
}

Status WriteBlocksState(const std::vector<const KvBlock*>& blocks, const StateShape& shape, uint32_t n_tokens,
                        uint32_t n_stream, std::span<uint8_t> dst, int n_threads) {
  return WriteBlocksState(blocks, KvLayout::Same(shape), n_tokens, n_stream, dst, n_threads);
}

Result<BlocksStateWriter> BlocksStateWriter::Start(const std::vector<const KvBlock*>& blocks, const KvLayout& layout,
                                                   uint32_t n_tokens, uint32_t n_stream, std::span<uint8_t> dst) {
  // layout.slot is what is written; blocks follow layout.rest.
  if (n_tokens == 0) return Status::InvalidArgument("kv state: empty sequence");
  if (Converts(layout)) AGENTKV_RETURN_IF_ERROR(CheckLayout(layout));
  if (dst.size() != StateBytesForBlocks(blocks, layout, n_tokens, n_stream)) {
    return Status::InvalidArgument("kv state: destination buffer has the wrong size");
  }
  if (RestorablePrefix(blocks, layout.rest, n_tokens) < n_tokens) {
    return Status::InvalidArgument("kv state: blocks do not cover " + std::to_string(n_tokens) + " positions");
  }
  return WriteHeaders(blocks, layout, n_tokens, n_stream, dst);
}

Result<BlocksStateWriter> BlocksStateWriter::StartWithoutBlocks(const KvLayout& layout, uint32_t n_tokens,
                                                                uint32_t n_stream, std::span<uint8_t> dst) {
  static const std::vector<const KvBlock*> kNoBlocks;
  if (n_tokens == 0) return Status::InvalidArgument("kv state: empty sequence");
  for (const SectionShape& s : layout.rest.sections) {
    if (s.swa_window != 0) return Status::Unsupported("kv state: a sliding-window section needs its blocks up front");
  }
  if (Converts(layout)) AGENTKV_RETURN_IF_ERROR(CheckLayout(layout));
  if (dst.size() != MaxStateBytes(layout.slot, n_tokens, n_stream)) {
    return Status::InvalidArgument("kv state: destination buffer has the wrong size");
  }
  return WriteHeaders(kNoBlocks, layout, n_tokens, n_stream, dst);
}

Result<BlocksStateWriter> BlocksStateWriter::WriteHeaders(const std::vector<const KvBlock*>& blocks,
                                                          const KvLayout& layout, uint32_t n_tokens, uint32_t n_stream,
                                                          std::span<uint8_t> dst) {
  const StateShape& shape = layout.slot;
  // One pass writes the headers and notes where each layer's rows go; the
  // row copies (nearly all the bytes) come later, one layer's K or V each.
  BlocksStateWriter writer(blocks, layout, dst);
  uint8_t* w = dst.data();
  auto put = [&w](auto v) {
    std::memcpy(w, &v, sizeof(v));
    w += sizeof(v);
  };
  put(kLlamaSeqStateMagic);
  put(int32_t{0});  // source seq id: ignored by the reader
  for (size_t si = 0; si < shape.sections.size(); ++si) {
    const SectionShape& s = shape.sections[si];
    auto [lo, hi] = WriteRange(blocks, layout.rest.sections[si], si, n_tokens);
    put(n_stream);
    put(hi - lo);
    for (uint32_t p = lo; p < hi; ++p) {
      put(static_cast<int32_t>(p));
      put(uint32_t{1});
      put(int32_t{0});  // seq id: ignored by the reader, which uses the destination's
    }
    put(uint32_t{0});  // v_trans
    put(s.n_layer);
    for (int kv = 0; kv < (s.has_v ? 2 : 1); ++kv) {
      const bool is_k = kv == 0;
      for (uint32_t l = 0; l < s.n_layer; ++l) {
        const uint64_t rb = is_k ? s.k_row_bytes[l] : s.v_row_bytes[l];
        put(is_k ? s.k_type[l] : s.v_type[l]);
        put(rb);
        writer.copies_.push_back({static_cast<size_t>(w - dst.data()), si, l, is_k, lo, hi});
        w += (hi - lo) * rb;
      }
    }
    for (uint32_t st = 1; st < n_stream; ++st) put(uint32_t{0});
  }
  if (w != dst.data() + dst.size()) return Status::Internal("kv state: size accounting mismatch");
  return writer;
}

uint64_t BlocksStateWriter::RowBytesPerPosition(const RowCopy& c) const {
  const SectionShape& s = layout_.slot.sections[c.section];
  return c.is_k ? s.k_row_bytes[c.layer] : s.v_row_bytes[c.layer];
}

std::pair<size_t, size_t> BlocksStateWriter::RowBytes(size_t i) const {
  const RowCopy& c = copies_[i];
  return {c.offset, c.offset + (c.hi - c.lo) * RowBytesPerPosition(c)};
}

size_t BlocksStateWriter::FirstRowCopyEndingAfter(size_t offset) const {
  size_t lo = 0, hi = copies_.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (RowBytes(mid).second <= offset) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

void BlocksStateWriter::CopyRows(size_t i) const {
  const RowCopy& c = copies_[i];
  for (uint32_t p = c.lo; p < c.hi;) {
    const KvBlock& b = *(*blocks_)[p / kBlockTokens];
    const KvTensor* t = FindTensor(b, TensorName(c.section, c.layer, c.is_k));  // present: RestorablePrefix checked
    const uint32_t run_end = std::min(c.hi, t->first_pos + t->n_rows);
    CopyPositions(c, *t, p, run_end);
    p = run_end;
  }
}

Status BlocksStateWriter::CopyBlock(const KvBlock& b) const {
  const uint32_t lo = b.first_pos();
  for (const RowCopy& c : copies_) {
    const uint32_t hi = std::min(c.hi, lo + b.n_tokens);
    if (lo >= hi) continue;
    const KvTensor* t = FindTensor(b, TensorName(c.section, c.layer, c.is_k));
    const SectionShape& rest = layout_.rest.sections[c.section];
    const uint64_t rest_rb = c.is_k ? rest.k_row_bytes[c.layer] : rest.v_row_bytes[c.layer];
    if (t == nullptr || t->row_bytes != rest_rb || t->data.size() != uint64_t{t->n_rows} * rest_rb ||
        t->first_pos > lo || t->first_pos + t->n_rows < hi) {
      return Status::InvalidArgument("kv state: block " + std::to_string(b.index) + " lacks rows of " +
                                     TensorName(c.section, c.layer, c.is_k));
    }
  }
  for (const RowCopy& c : copies_) {
    const uint32_t hi = std::min(c.hi, lo + b.n_tokens);
    if (lo < hi) CopyPositions(c, *FindTensor(b, TensorName(c.section, c.layer, c.is_k)), lo, hi);
  }
  return Status::OK();
}

Status BlocksStateWriter::CopyBlockTensor(size_t i, const KvBlock& b, const KvTensor& t) const {
  const RowCopy& c = copies_[i];
  const uint32_t lo = std::max(c.lo, b.first_pos());
  const uint32_t hi = std::min(c.hi, b.first_pos() + b.n_tokens);
  if (lo >= hi) return Status::OK();
  const SectionShape& rest = layout_.rest.sections[c.section];
  const uint64_t rest_rb = c.is_k ? rest.k_row_bytes[c.layer] : rest.v_row_bytes[c.layer];
  if (t.name != TensorName(c.section, c.layer, c.is_k) || t.row_bytes != rest_rb ||
      t.data.size() != uint64_t{t.n_rows} * rest_rb || t.first_pos > lo || t.first_pos + t.n_rows < hi) {
    return Status::InvalidArgument("kv state: block " + std::to_string(b.index) + " lacks rows of " +
                                   TensorName(c.section, c.layer, c.is_k));
  }
  CopyPositions(c, t, lo, hi);
  return Status::OK();
}

std::string BlocksStateWriter::RowTensorName(size_t i) const {
  const RowCopy& c = copies_[i];
  return TensorName(c.section, c.layer, c.is_k);
}

// Positions [lo, hi) of copy c from tensor t (which holds them).
void BlocksStateWriter::CopyPositions(const RowCopy& c, const KvTensor& t, uint32_t lo, uint32_t hi) const {
  const SectionShape& s = layout_.slot.sections[c.section];
  const SectionShape& rest = layout_.rest.sections[c.section];
  const uint64_t rb = RowBytesPerPosition(c);
  const uint64_t rest_rb = c.is_k ? rest.k_row_bytes[c.layer] : rest.v_row_bytes[c.layer];
  const int32_t type = c.is_k ? s.k_type[c.layer] : s.v_type[c.layer];
  const int32_t rest_type = c.is_k ? rest.k_type[c.layer] : rest.v_type[c.layer];
  const uint8_t* from = t.data.data() + (lo - t.first_pos) * rest_rb;
  uint8_t* out = dst_.data() + c.offset + (lo - c.lo) * rb;
  if (type == rest_type) {
    std::memcpy(out, from, (hi - lo) * rb);
  } else {
    ConvertKvRows(rest_type, rest_rb, type, from, out, hi - lo);
  }
}

Status WriteBlocksState(const std::vector<const KvBlock*>& blocks, const KvLayout& layout, uint32_t n_tokens,
                        uint32_t n_stream, std::span<uint8_t> dst, int n_threads) {
  AGENTKV_ASSIGN_OR_RETURN(BlocksStateWriter writer, BlocksStateWriter::Start(blocks, layout, n_tokens, n_stream, dst));
  const bool big = dst.size() >= ParallelThreshold(layout);
  ParallelFor(writer.n_row_copies(), big ? n_threads : 1, [&](size_t i) { writer.CopyRows(i); });
  return Status::OK();
}

}  // namespace agentkv::engine
