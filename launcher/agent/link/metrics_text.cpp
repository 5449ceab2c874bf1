#include "agent/link/metrics_text.hpp"

#include <fmt/format.h>

#include <cmath>

namespace npu_run {

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void MetricsText::family(const std::string& name, const char* type, const char* help) {
  if (!families_.insert(name).second) return;
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void MetricsText::sample(const std::string& name, double value, Labels labels) {
  text_ += name;
  if (labels.size() > 0) {
    text_ += '{';
    bool first = true;
    for (const auto& [key, v] : labels) {
      text_ += fmt::format("{}{}=\"{}\"", first ? "" : ",", key, escape_label_value(v));
      first = false;
    }
    text_ += '}';
  }
  if (std::isnan(value)) {
    text_ += " NaN\n";
  } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
    text_ += fmt::format(" {}\n", static_cast<long long>(value));
  } else {
    text_ += fmt::format(" {:.6g}\n", value);
  }
}

void MetricsText::gauge(const std::string& name, const char* help, double value, Labels labels) {
  family(name, "gauge", help);
  sample(name, value, labels);
}

void MetricsText::counter(const std::string& name, const char* help, double value, Labels labels) {
  family(name, "counter", help);
  sample(name, value, labels);
}

}  // namespace npu_run
