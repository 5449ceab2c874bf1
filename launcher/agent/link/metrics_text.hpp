// Prometheus' text exposition format (version 0.0.4), written one family at a time: "# HELP"
// and "# TYPE" once per metric, then its samples with escaped label values. What `--metrics-port`
// serves; checked by Prometheus' own `promtool check metrics` in the tests.
#pragma once

#include <initializer_list>
#include <set>
#include <string>
#include <utility>

namespace npu_run {

class MetricsText {
 public:
  using Labels = std::initializer_list<std::pair<const char*, std::string>>;

  // Starts a family: `type` is "counter" or "gauge"; a counter's name ends in _total. A family
  // already started is not announced again.
  void family(const std::string& name, const char* type, const char* help);
  // One sample of the family last started (or `name` itself).
  void sample(const std::string& name, double value, Labels labels = {});
  // family() and one sample.
  void gauge(const std::string& name, const char* help, double value, Labels labels = {});
  void counter(const std::string& name, const char* help, double value, Labels labels = {});

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::set<std::string> families_;
};

// A label value as the format wants it: backslash, double quote and newline escaped.
std::string escape_label_value(const std::string& value);

}  // namespace npu_run
