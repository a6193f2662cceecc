#pragma once
// LayerGate: what a gated decode waits for before each layer's attention.
//
// Context::DecodeGated runs a decode in a slot whose KV rows are still being
// imported (engine/layer_gated_import.h): before the graph computes layer
// il's attention input (its node "attn_norm-<il>", the first of every
// layer in llama.cpp's graphs), the decode stops and calls WaitLayer(il),
// which returns true once every row of layer il the decode may read is in
// the cache, or false to abandon the decode (its outputs are then garbage).
// Called on the decoding thread, layers in ascending order, once per layer
// and graph.
//
// Before that, while it plans which nodes to compute together, the decode
// asks LayerReady(il) without waiting: true means every row of layer il is
// in already (and counts as waited for), so the decode computes on through
// that layer without stopping, and WaitLayer(il) is not called. Every stop
// is a synchronisation and a cut in the graph, so a decode whose rows are
// all in runs as one piece.

namespace agentkv::engine {

class LayerGate {
 public:
  virtual ~LayerGate() = default;
  virtual bool WaitLayer(int il) = 0;
  virtual bool LayerReady(int /*il*/) { return false; }  // false: stop before layer il
};

}  // namespace agentkv::engine
