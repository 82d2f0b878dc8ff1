#include "runtime/graph.h"

#include <cstring>

#include "ir/error.h"

namespace kiln {

namespace {

// Scratch offsets are multiples of this: a cache line on the CPU, and the
// alignment CUDA's vector loads and allocations give.
constexpr size_t kAlign = 256;

size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

size_t bytes_of(DType dtype, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return static_cast<size_t>(n) * static_cast<size_t>(dtype_bytes(dtype));
}

}  // namespace

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Tensor::dim(int i) const {
  int r = rank();
  if (i < -r || i >= r) throw Error("value " + str() + " has no axis " + std::to_string(i));
  return shape[static_cast<size_t>(i < 0 ? i + r : i)];
}

std::string Tensor::str() const { return type_str(Type{dtype, shape}); }

Tensor Tensor::rows(int64_t first, int64_t count) const {
  if (rank() < 1 || first < 0 || count < 0 || first + count > shape[0])
    throw Error("rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                ") are outside " + str());
  Tensor v = *this;
  v.offset += first * (numel() / std::max<int64_t>(shape[0], 1));
  v.shape[0] = count;
  return v;
}

Tensor Tensor::reshape(Shape s) const {
  Tensor v = *this;
  v.shape = std::move(s);
  if (v.numel() != numel()) throw Error("cannot view " + str() + " as " + v.str());
  return v;
}

int Graph::new_buffer(size_t bytes, void* external) {
  if (recorded_) throw Error("graph: recorded already, no new values");
  buffers_.push_back(Buffer{bytes, external});
  return static_cast<int>(buffers_.size()) - 1;
}

Tensor Graph::external(const void* data, DType dtype, Shape shape) {
  if (!data) throw Error("graph: external " + type_str(Type{dtype, shape}) + " has no data");
  int b = new_buffer(bytes_of(dtype, shape), const_cast<void*>(data));
  return Tensor{b, 0, 0, dtype, std::move(shape)};
}

Tensor Graph::scratch(DType dtype, Shape shape) {
  int b = new_buffer(bytes_of(dtype, shape), nullptr);
  return Tensor{b, 0, 0, dtype, std::move(shape)};
}

Tensor Graph::input(const std::string& label, const void* host, DType dtype, Shape shape) {
  if (rt_.backend().host_visible()) return external(host, dtype, std::move(shape));
  Tensor v = scratch(dtype, std::move(shape));
  Node n;
  n.label = label;
  n.copy = Node::Copy::upload;
  n.value = v;
  n.host = const_cast<void*>(host);
  nodes_.push_back(std::move(n));
  use(v, nodes_.size() - 1, "input '" + label + "'");
  return v;
}

void Graph::output(const std::string& label, const Tensor& v, void* host) {
  Buffer& b = buffers_.at(static_cast<size_t>(v.buf));
  if (rt_.backend().host_visible() && !b.external && v.offset == 0 &&
      bytes_of(v.dtype, v.shape) == b.bytes) {
    b.external = host;
    return;
  }
  Node n;
  n.label = label;
  n.copy = Node::Copy::download;
  n.value = v;
  n.host = host;
  nodes_.push_back(std::move(n));
  use(v, nodes_.size() - 1, "output '" + label + "'");
}

Tensor Graph::overwrite(const Tensor& v) {
  use(v, nodes_.size(), "overwrite");
  Tensor w = v;
  w.version = ++buffers_[static_cast<size_t>(v.buf)].version;
  return w;
}

void Graph::use(const Tensor& v, size_t node, const std::string& who) {
  if (v.buf < 0 || static_cast<size_t>(v.buf) >= buffers_.size())
    throw Error("graph: " + who + " reads a value " + v.str() + " of no buffer of this graph");
  Buffer& b = buffers_[static_cast<size_t>(v.buf)];
  if (v.version != b.version)
    throw Error("graph: " + who + " reads a value " + v.str() +
                " that an in-place step has since overwritten");
  if (bytes_of(v.dtype, v.shape) + static_cast<size_t>(v.offset * dtype_bytes(v.dtype)) > b.bytes)
    throw Error("graph: " + who + ": value " + v.str() + " runs past its buffer");
  int i = static_cast<int>(node);
  if (b.first < 0) b.first = i;
  b.last = std::max(b.last, i);
}

void Graph::launch(const std::string& label, const std::string& kernel,
                   const std::map<std::string, DType>& dtypes, const Operands& args,
                   const Sizes& sizes, const std::map<std::string, int64_t>& fixed) {
  if (recorded_) throw Error("graph: recorded already, no new steps");
  Node n;
  n.label = prefix_ + label;
  n.kernel = kernel;
  n.dtypes = dtypes;
  n.args = args;
  n.sizes = sizes;
  n.fixed = fixed;
  for (const auto& [name, a] : args)
    if (const Tensor* v = std::get_if<Tensor>(&a))
      use(*v, nodes_.size(),
          "step '" + n.label + "': kernel '" + kernel + "', parameter '" + name + "'");
  nodes_.push_back(std::move(n));
}

std::string Graph::key(const Tensor& v) {
  return "b" + std::to_string(v.buf) + "v" + std::to_string(v.version) + "@" +
         std::to_string(v.offset) + v.str();
}

std::vector<Tensor> Graph::memo(const std::string& key,
                                const std::function<std::vector<Tensor>()>& make) {
  auto it = memo_.find(key);
  if (it != memo_.end()) {
    bool fresh = true;
    for (const Tensor& v : it->second)
      fresh &= buffers_[static_cast<size_t>(v.buf)].version == v.version;
    if (fresh) return it->second;
  }
  std::vector<Tensor> vs = make();
  memo_[key] = vs;
  return vs;
}

size_t Graph::unplanned_bytes() const {
  size_t n = 0;
  for (const Buffer& b : buffers_)
    if (!b.external && b.first >= 0) n += aligned(b.bytes);
  return n;
}

// Best fit over a free list, in node order: a buffer takes its bytes before
// the first step that touches it and gives them back after the last.
void Graph::plan_scratch() {
  std::vector<std::vector<size_t>> starts(nodes_.size() + 1), ends(nodes_.size() + 1);
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (!buffers_[i].external && buffers_[i].first >= 0) {
      starts[static_cast<size_t>(buffers_[i].first)].push_back(i);
      ends[static_cast<size_t>(buffers_[i].last)].push_back(i);
    }
  std::map<size_t, size_t> free;  // offset -> bytes
  size_t top = 0;
  for (size_t n = 0; n < starts.size(); ++n) {
    for (size_t i : starts[n]) {
      size_t need = aligned(std::max<size_t>(buffers_[i].bytes, 1));
      auto best = free.end();
      for (auto it = free.begin(); it != free.end(); ++it)
        if (it->second >= need && (best == free.end() || it->second < best->second)) best = it;
      if (best == free.end()) {
        buffers_[i].offset = top;
        top += need;
        continue;
      }
      buffers_[i].offset = best->first;
      if (best->second > need) free[best->first + need] = best->second - need;
      free.erase(best);
    }
    for (size_t i : ends[n]) {
      size_t off = buffers_[i].offset, len = aligned(std::max<size_t>(buffers_[i].bytes, 1));
      auto next = free.lower_bound(off);
      if (next != free.end() && next->first == off + len) {
        len += next->second;
        free.erase(next);
      }
      auto prev = free.lower_bound(off);
      if (prev != free.begin() && std::prev(prev)->first + std::prev(prev)->second == off) {
        --prev;
        prev->second += len;
      } else {
        free[off] = len;
      }
    }
  }
  Backend& be = rt_.backend();
  if (top > 0) {
    arena_ = DeviceBuffer(be, top);
    // Host memory comes mapped, its pages faulted in on first touch: touch
    // them now, not in the plan's first (timed) run.
    if (be.host_visible()) std::memset(arena_.data(), 0, top);
  }
}

void* Graph::address(const Tensor& v) const {
  const Buffer& b = buffers_[static_cast<size_t>(v.buf)];
  auto* base = static_cast<uint8_t*>(b.external ? b.external : arena_.data());
  if (!b.external) base += b.offset;
  return base + v.offset * dtype_bytes(v.dtype);
}

void Graph::record(Plan& plan, bool compile) {
  if (recorded_) throw Error("graph: recorded already");
  recorded_ = true;
  plan_scratch();
  for (const Node& n : nodes_) {
    size_t bytes = bytes_of(n.value.dtype, n.value.shape);
    switch (n.copy) {
      case Node::Copy::upload: plan.upload(n.label, address(n.value), n.host, bytes); break;
      case Node::Copy::download: plan.download(n.label, n.host, address(n.value), bytes); break;
      case Node::Copy::none: {
        Plan::Args args;
        for (const auto& [name, a] : n.args) {
          if (const Tensor* v = std::get_if<Tensor>(&a))
            args[name] = Arg::buffer(address(*v), v->numel());
          else if (const Arg* s = std::get_if<Arg>(&a))
            args[name] = *s;
          else
            args[name] = std::get<Plan::Dynamic>(a);
        }
        plan.launch(n.label, n.kernel, n.dtypes, args, n.sizes, n.fixed);
        break;
      }
    }
  }
  if (compile) plan.compile();
}

}  // namespace kiln
