#pragma once
// LayerGate: what a gated decode does before each layer.
//
// Context::DecodeGated runs a decode in a slot whose KV rows are still being
// imported (engine/layer_gated_import.h). Before each layer il is computed
// (llama_set_layer_callback: after the first node llama.cpp's graph builder
// makes for the layer, before any that reads its cache), the decode asks
// LayerReady(il) without stopping: true means every row of layer il the
// decode may read is in the cache (the gate may copy them in right there),
// and the decode computes on through that layer. False makes the decode
// stop there, synchronise, and call WaitLayer(il), which returns true once
// the rows are in, or false to abandon the decode (its outputs are then
// garbage). Called on the decoding thread, inside llama_decode, layers in
// ascending order, once per layer and graph: a gate may call into the
// llama_context only through llama_state_seq_import_layer
// (LayerGatedImport). Every stop is a synchronisation and a cut in the
// graph, so a decode whose rows are all in runs as one piece.

namespace agentkv::engine {

class LayerGate {
 public:
  virtual ~LayerGate() = default;
  virtual bool WaitLayer(int il) = 0;
  virtual bool LayerReady(int /*il*/) { return false; }  // false: stop before layer il
};

}  // namespace agentkv::engine
