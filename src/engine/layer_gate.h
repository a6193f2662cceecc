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

namespace agentkv::engine {

class LayerGate {
 public:
  virtual ~LayerGate() = default;
  virtual bool WaitLayer(int il) = 0;
};

}  // namespace agentkv::engine
