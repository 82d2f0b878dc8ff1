// The model runtime for Python, in the manner of llama-cpp-python: a GGUF
// file or a Hugging Face folder on a backend, its tokenizer, every
// position's logits as a NumPy array, and generation (kiln/__init__.py adds
// the completion dicts and streaming). Forwards and generation run with the
// GIL released; a streaming callback takes it back for each piece.
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"
#include "ir/error.h"
#include "models/generation.h"
#include "models/llm.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::py {
namespace {

class Model {
 public:
  Model(const std::string& path, int threads, const std::string& device, int64_t n_ctx,
        const std::string& kv) {
    RuntimeOptions o;
    o.threads = threads;
    o.backend = device;
    rt_ = std::make_unique<Runtime>(o);
    llm_ = std::make_unique<Llm>(path, *rt_, n_ctx, parse_kv_cache_type(kv));
  }

  Llm& llm() { return *llm_; }
  const Tokenizer& tok() const { return llm_->tokenizer(); }

  std::vector<int32_t> tokenize(const std::string& text, nb::object add_bos, bool special) const {
    bool bos = add_bos.is_none() ? tok().add_bos_default() && tok().bos_id() >= 0
                                 : nb::cast<bool>(add_bos);
    return tok().encode(text, bos, special);
  }

  // Every position's logits for `tokens`, from an empty cache.
  nb::ndarray<nb::numpy, float, nb::ndim<2>> logits(const std::vector<int32_t>& tokens) {
    if (tokens.empty()) throw Error("logits: no tokens");
    auto* out = new std::vector<float>();
    {
      nb::gil_scoped_release release;
      try {
        llm_->reset();
        *out = llm_->forward(tokens, true);
      } catch (...) {
        delete out;
        throw;
      }
    }
    nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
    const size_t vocab = static_cast<size_t>(llm_->config().n_vocab);
    return nb::ndarray<nb::numpy, float, nb::ndim<2>>(out->data(), {out->size() / vocab, vocab},
                                                      owner);
  }

  nb::dict generate(const std::vector<int32_t>& prompt, int64_t max_tokens, double temperature,
                    int64_t top_k, double top_p, double repeat_penalty, uint64_t seed,
                    const std::vector<std::string>& stop, nb::object on_text) {
    if (prompt.empty()) throw Error("generate: the prompt has no tokens");
    GenerationOptions o;
    o.n_predict = max_tokens;
    o.sampler.temperature = temperature;
    o.sampler.top_k = top_k;
    o.sampler.top_p = top_p;
    o.sampler.repeat_penalty = repeat_penalty;
    o.sampler.seed = seed;
    o.stop = stop;
    std::function<void(const std::string&)> cb;
    if (!on_text.is_none())
      cb = [&](const std::string& piece) {
        nb::gil_scoped_acquire gil;
        on_text(nb::bytes(piece.data(), piece.size()));
      };
    GenerationResult r;
    {
      nb::gil_scoped_release release;
      llm_->reset();
      r = kiln::generate(*llm_, prompt, o, cb);
    }
    nb::dict d;
    d["text"] = nb::bytes(r.text.data(), r.text.size());
    d["tokens"] = r.generated;
    d["prompt_tokens"] = r.prompt;
    d["stop_reason"] = r.stop_reason;
    d["prefill_ms"] = r.prefill_ms;
    d["token_ms"] = r.token_ms;
    return d;
  }

 private:
  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<Llm> llm_;
};

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<Model>(m, "_Model")
      .def(nb::init<const std::string&, int, const std::string&, int64_t, const std::string&>(),
           "path"_a, "threads"_a = 0, "device"_a = "cpu", "n_ctx"_a = 0, "kv"_a = "f16",
           nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("arch", [](Model& m) { return m.llm().config().arch; })
      .def_prop_ro("n_vocab", [](Model& m) { return m.llm().config().n_vocab; })
      .def_prop_ro("n_embd", [](Model& m) { return m.llm().config().n_embd; })
      .def_prop_ro("n_layer", [](Model& m) { return m.llm().config().n_layer; })
      .def_prop_ro("n_ctx", [](Model& m) { return m.llm().n_ctx(); })
      .def_prop_ro("bos", [](Model& m) { return m.tok().bos_id(); })
      .def_prop_ro("eos", [](Model& m) { return m.tok().eos_id(); })
      .def("tokenize", &Model::tokenize, "text"_a, "add_bos"_a.none() = nb::none(),
           "special"_a = false)
      .def(
          "detokenize",
          [](Model& m, const std::vector<int32_t>& ids) {
            std::string s = m.tok().decode(ids);
            return nb::bytes(s.data(), s.size());
          },
          "tokens"_a)
      .def("logits", &Model::logits, "tokens"_a)
      .def("_generate", &Model::generate, "prompt"_a, "max_tokens"_a, "temperature"_a, "top_k"_a,
           "top_p"_a, "repeat_penalty"_a, "seed"_a, "stop"_a, "on_text"_a.none());
}

}  // namespace kiln::py
