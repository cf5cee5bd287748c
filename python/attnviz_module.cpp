// attnviz._attnviz: the compiled half of `import attnviz` (python/attnviz/__init__.py is the
// other). A Model owns one Engine, as the GUI's worker does: a longer text run after a
// shorter one reuses the cache. A run returns a Trace that holds the engine's shared trace
// (Engine::share: never written again) and the model, so its arrays stay valid after the
// model is gone. Tensors are the dump's (core/export/dump.h: same names, shapes and types);
// a dense tensor the trace holds is lent to numpy without a copy, read-only.
//
// The analyses (lens, heads, qk, patch, scan) run attnviz-cli's own subcommand in-process
// and return the object its --json prints, so both give the same fields by construction.
// The GIL is released while the engine or a subcommand runs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli.h"
#include "app/commands.h"
#include "core/engine/ablation.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/export/dump.h"
#include "core/export/export.h"
#include "core/json_reader.h"
#include "core/model/chat_source.h"
#include "core/model/paths.h"
#include "core/tokenize/labels.h"

namespace py = pybind11;
using namespace attnviz;

namespace {

// Raised for every failure, with the message attnviz-cli prints after "error: ".
py::object& error_type() {
  static py::object* type = nullptr;  // set once at import, never freed (the module lives as long)
  if (!type) type = new py::object();
  return *type;
}

[[noreturn]] void raise_error(const std::string& message) {
  PyErr_SetString(error_type().ptr(), message.c_str());
  throw py::error_already_set();
}

// A trace kept for Python: the engine's shared trace, the model it came from, and the dump's
// tensors gathered over it (their borrowed pointers and generators read `trace`).
struct PyTrace {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Trace> trace;
  std::unique_ptr<SafetensorsWriter> tensors;

  const SafetensorsWriter::Entry* find(const std::string& name) const {
    for (const auto& e : tensors->entries())
      if (e.name == name) return &e;
    return nullptr;
  }
};

py::array entry_array(const std::shared_ptr<PyTrace>& self, const SafetensorsWriter::Entry& e) {
  std::vector<py::ssize_t> shape(e.shape.begin(), e.shape.end());
  if (e.ref && e.dtype == DType::F32) {
    // Lent: the capsule keeps the trace (and so the buffer) alive as long as the array.
    auto* keep = new std::shared_ptr<PyTrace>(self);
    py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<PyTrace>*>(p); });
    py::array_t<float> a(shape, static_cast<const float*>(e.ref), owner);
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return std::move(a);
  }
  if (e.dtype == DType::I32) {
    py::array_t<int32_t> a(shape);
    std::memcpy(a.mutable_data(), e.bytes.data(), e.bytes.size());
    return std::move(a);
  }
  py::array_t<float> a(shape);
  float* dst = a.mutable_data();
  if (!e.bytes.empty()) {
    std::memcpy(dst, e.bytes.data(), e.bytes.size());
  } else if (e.fill) {
    int64_t slice = 1;
    for (size_t i = 1; i < e.shape.size(); ++i) slice *= e.shape[i];
    py::gil_scoped_release unlocked;
    for (int64_t i = 0; i < e.shape[0]; ++i) e.fill(i, dst + i * slice);
  } else if (e.ref) {  // a borrowed tensor of another type: copied
    std::memcpy(dst, e.ref, e.size());
  }
  return std::move(a);
}

struct PyModel {
  InputOptions opts;  // --model, --backend, --arith, --weights as the CLI takes them
  std::unique_ptr<Engine> engine;
  std::mutex run_lock;  // one run at a time on this model's engine (threads may share a model)
  int default_block = 0;  // the engine's block size as opened: the model's context

  PyModel(const std::string& name, const std::string& backend, const std::optional<std::string>& arith,
          const std::optional<std::string>& weights) {
    opts.model = name;
    opts.backend = backend;
    if (arith) opts.arith = *arith;
    if (weights) opts.weights = *weights;
    std::ostringstream notes;
    {
      py::gil_scoped_release unlocked;
      engine = std::make_unique<Engine>(open_engine(opts, notes));
    }
    default_block = engine->block_size();
    if (!notes.str().empty()) PyErr_WarnEx(PyExc_UserWarning, notes.str().c_str(), 1);
  }
  const Model& model() const { return engine->model(); }
};

std::vector<int> check_tokens(const Model& m, const std::vector<int>& ids) {
  for (int id : ids)
    if (id < 0 || id >= m.config.vocab_size)
      raise_error("tokens: id " + std::to_string(id) + " is outside the vocabulary (0 … " +
                  std::to_string(m.config.vocab_size - 1) + ")");
  return ids;
}

nlohmann::ordered_json messages_json(const py::object& chat) {
  const std::string text = py::str(py::module_::import("json").attr("dumps")(chat));
  if (static_cast<int64_t>(text.size()) > kMaxChatMessagesBytes)  // as for a messages file
    raise_error("chat: the messages are " + std::to_string(text.size()) + " bytes as JSON, more than the " +
                std::to_string(kMaxChatMessagesBytes) + " a chat may have");
  return parse_json_ordered(text, "chat messages");
}

std::shared_ptr<PyTrace> run_model(PyModel& pm, const std::optional<std::vector<int>>& tokens,
                                   const std::optional<std::string>& text, const py::object& chat,
                                   const std::optional<int>& block_size, const std::optional<std::string>& stages,
                                   const std::optional<std::string>& ablate, const std::string& ablate_mode) {
  const int given = (tokens ? 1 : 0) + (text ? 1 : 0) + (chat.is_none() ? 0 : 1);
  if (given != 1) raise_error("run: give exactly one of tokens=[…], text=\"…\" or chat=[{\"role\", \"content\"}, …]");
  if (block_size && *block_size < 1) raise_error("block_size: " + std::to_string(*block_size) + " is not a positive length");
  DumpSelection sel;
  if (stages) sel.stages = parse_stage_list(*stages);
  const Model& m = pm.model();
  std::vector<int> ids;
  if (tokens) ids = check_tokens(m, *tokens);
  std::string rendered;
  if (!chat.is_none()) rendered = render_chat_messages(pm.opts.model, messages_json(chat), "chat=", {});
  auto out = std::make_shared<PyTrace>();
  {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(pm.run_lock);
    Engine& e = *pm.engine;
    e.set_block_size(block_size ? *block_size : pm.default_block);
    e.set_ablation(parse_ablation(ablate ? *ablate : "", ablate_mode, m.config));
    if (text) ids = encode_text(m, *text);
    if (!chat.is_none()) {
      if (!m.tokenizer) encode_text(m, rendered);  // throws, saying why the model has no tokenizer
      ids = m.tokenizer->encode_with(rendered, /*add_special=*/false);
    }
    e.run(ids);
    out->trace = e.share();
    out->model = e.model_ptr();
    out->tensors = std::make_unique<SafetensorsWriter>(dump_tensors(*out->trace, {}, sel));
  }
  return out;
}

// attnviz-cli SUBCOMMAND ARGS... in-process; the printed JSON as a Python object.
py::object run_cli_json(const std::vector<std::string>& args) {
  CliResult r;
  {
    py::gil_scoped_release unlocked;
    r = run_cli_captured(args);
  }
  if (r.code != 0) {
    std::string msg = r.err;
    if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    raise_error(msg.empty() ? "attnviz-cli " + args.front() + " failed (exit " + std::to_string(r.code) + ")" : msg);
  }
  return py::module_::import("json").attr("loads")(r.out);
}

}  // namespace

PYBIND11_MODULE(_attnviz, mod) {
  mod.doc() = "attnviz's engine: run causal transformers and read every recorded matrix";
  error_type() = py::reinterpret_borrow<py::object>(PyErr_NewException("attnviz.Error", PyExc_RuntimeError, nullptr));
  mod.attr("Error") = error_type();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(error_type().ptr(), e.what());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(error_type().ptr(), "out of memory: use a shorter text (block_size) or a smaller model");
    }
  });

  py::class_<PyTrace, std::shared_ptr<PyTrace>>(mod, "_Trace")
      .def("keys",
           [](const PyTrace& t) {
             std::vector<std::string> k;
             for (const auto& e : t.tensors->entries()) k.push_back(e.name);
             return k;
           })
      .def("get",
           [](const std::shared_ptr<PyTrace>& t, const std::string& name) -> py::object {
             const auto* e = t->find(name);
             if (!e) return py::none();
             return entry_array(t, *e);
           })
      .def_property_readonly("tokens", [](const PyTrace& t) { return t.trace->tokens; })
      .def_property_readonly("token_strings",
                             [](const PyTrace& t) {
                               std::vector<std::string> s;
                               if (!t.model->tokenizer) {
                                 for (int id : t.trace->tokens) s.push_back(std::to_string(id));
                                 return s;
                               }
                               for (const auto& l : token_labels(*t.model->tokenizer, t.trace->tokens)) s.push_back(l.text);
                               return s;
                             })
      .def_property_readonly("metadata", [](const PyTrace& t) { return t.tensors->metadata(); })
      .def_property_readonly("n_layer", [](const PyTrace& t) { return static_cast<int>(t.trace->layers.size()); })
      .def("has_probs",
           [](const PyTrace& t, int l) {
             if (l < 0 || l >= static_cast<int>(t.trace->layers.size())) raise_error("layer " + std::to_string(l) + " is out of range");
             return t.trace->layers[static_cast<size_t>(l)].has(Stage::Probs);
           })
      .def("png", [](const PyTrace& t, int layer, int head, const std::string& stage, int cell) {
        ExportOptions o;
        o.stage = parse_stage(stage);
        o.layer = layer;
        o.head = head;
        o.cell_px = cell;
        std::string png;
        {
          py::gil_scoped_release unlocked;
          png = render_export(*t.trace, *t.model, o, ExportFormat::Png);
        }
        return py::bytes(png);
      });

  py::class_<PyModel>(mod, "_Model")
      .def(py::init<const std::string&, const std::string&, const std::optional<std::string>&,
                    const std::optional<std::string>&>(),
           py::arg("name"), py::arg("backend") = "cpu", py::arg("arith") = py::none(), py::arg("weights") = py::none())
      .def_property_readonly("name", [](const PyModel& m) { return m.opts.model; })
      .def_property_readonly("backend_name", [](const PyModel& m) { return m.engine->backend().name(); })
      .def("info_json", [](const PyModel& m) { return model_info_json(m.model()).dump(); })
      .def("encode",
           [](const PyModel& m, const std::string& text, bool add_special) {
             const Model& model = m.model();
             if (!model.tokenizer) encode_text(model, text);  // throws, saying why
             return model.tokenizer->encode_with(text, add_special);
           },
           py::arg("text"), py::arg("add_special") = true)
      .def("decode",
           [](const PyModel& m, const std::vector<int>& ids) {
             const Model& model = m.model();
             if (!model.tokenizer) raise_error("model '" + m.opts.model + "' has no tokenizer to decode with");
             return py::bytes(model.tokenizer->decode(check_tokens(model, ids)));
           })
      .def("chat_template",
           [](const PyModel& m, const py::object& messages, bool add_generation_prompt) {
             ChatOptions o;
             o.add_generation_prompt = add_generation_prompt;
             return render_chat_messages(m.opts.model, messages_json(messages), "messages", o);
           },
           py::arg("messages"), py::arg("add_generation_prompt") = true)
      .def("run", &run_model, py::arg("tokens") = py::none(), py::arg("text") = py::none(),
           py::arg("chat") = py::none(), py::arg("block_size") = py::none(), py::arg("stages") = py::none(),
           py::arg("ablate") = py::none(), py::arg("ablate_mode") = "zero")
      .def_property_readonly("last_recomputed_from", [](const PyModel& m) { return m.engine->last_recomputed_from(); });

  mod.def("_add_data_dir", &add_data_dir, "a folder holding assets/ and shaders/ (share/attnviz)");
  mod.def("_cli_json", &run_cli_json, "attnviz-cli ARGS... in-process: the JSON it prints, as Python objects");
}
