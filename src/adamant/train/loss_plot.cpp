#include "adamant/train/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "adamant/core/error.h"

#if ADAMANT_HAVE_CAIRO
#include <cairo.h>
#endif

namespace adamant::train {

#if ADAMANT_HAVE_CAIRO
namespace {

struct Color {
  double r, g, b;
};
constexpr Color kTrainColor{0.12, 0.47, 0.71};
constexpr Color kValidationColor{0.89, 0.40, 0.05};
constexpr Color kText{0.1, 0.1, 0.1};
constexpr Color kGrid{0.88, 0.88, 0.88};

// Tick spacing of 1, 2 or 5 times a power of ten giving about `target` ticks over `span`.
double nice_spacing(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double factor : {1.0, 2.0, 5.0}) {
    if (raw <= factor * power) return factor * power;
  }
  return 10.0 * power;
}

std::string tick_label(double value, double spacing) {
  const int decimals = spacing >= 1.0 ? 0 : static_cast<int>(std::ceil(-std::log10(spacing) - 1e-9));
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

class Canvas {
 public:
  Canvas(int width, int height)
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height)), cr_(cairo_create(surface_)) {
    ADAMANT_CHECK(cairo_status(cr_) == CAIRO_STATUS_SUCCESS, "loss plot: cannot create a {}x{} picture: {}", width,
                  height, cairo_status_to_string(cairo_status(cr_)));
    cairo_select_font_face(cr_, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  }
  ~Canvas() {
    cairo_destroy(cr_);
    cairo_surface_destroy(surface_);
  }
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  cairo_t* cr() { return cr_; }
  void color(Color c) { cairo_set_source_rgb(cr_, c.r, c.g, c.b); }
  // Text anchored by (ax, ay) in [0, 1]: 0 left/top, 0.5 centre, 1 right/bottom.
  void text(const std::string& s, double x, double y, double size, double ax, double ay, bool vertical = false) {
    cairo_set_font_size(cr_, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr_, s.c_str(), &e);
    cairo_save(cr_);
    cairo_translate(cr_, x, y);
    if (vertical) cairo_rotate(cr_, -M_PI / 2);
    cairo_move_to(cr_, -e.x_bearing - ax * e.width, -e.y_bearing - ay * e.height);
    cairo_show_text(cr_, s.c_str());
    cairo_restore(cr_);
  }
  void save(const std::filesystem::path& png) {
    const std::filesystem::path temporary = png.string() + ".tmp";
    cairo_surface_flush(surface_);
    const cairo_status_t status = cairo_surface_write_to_png(surface_, temporary.c_str());
    ADAMANT_CHECK(status == CAIRO_STATUS_SUCCESS, "loss plot: cannot write {}: {}", temporary.string(),
                  cairo_status_to_string(status));
    std::error_code error;
    std::filesystem::rename(temporary, png, error);
    ADAMANT_CHECK(!error, "loss plot: cannot rename {} to {}: {}", temporary.string(), png.string(), error.message());
  }

 private:
  cairo_surface_t* surface_;
  cairo_t* cr_;
};

}  // namespace
#endif  // ADAMANT_HAVE_CAIRO

LossCurves read_loss_curves(const std::filesystem::path& metrics_file) {
  std::ifstream in(metrics_file);
  ADAMANT_CHECK(in.good(), "loss plot: cannot read {}; give a run folder that holds metrics.jsonl",
                metrics_file.string());
  std::map<std::int64_t, double> train, validation;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.empty()) continue;
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    ADAMANT_CHECK(!record.is_discarded() && record.is_object(), "loss plot: {} line {} is not a JSON object",
                  metrics_file.string(), line_number);
    const std::string type = record.value("type", "");
    if (type == "train" && record.contains("loss") && record["loss"].is_number()) {
      train[record.at("step").get<std::int64_t>()] = record["loss"].get<double>();
    } else if (type == "validation" && record.contains("val_loss") && record["val_loss"].is_number()) {
      validation[record.at("step").get<std::int64_t>()] = record["val_loss"].get<double>();
    }
  }
  return {{train.begin(), train.end()}, {validation.begin(), validation.end()}};
}

#if ADAMANT_HAVE_CAIRO
void plot_loss_curves(const LossCurves& curves, const std::filesystem::path& png, const PlotOptions& options) {
  ADAMANT_CHECK(!curves.train.empty() || !curves.validation.empty(), "loss plot: no losses to draw for {}",
                png.string());
  // Data ranges over the finite points.
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const auto* curve : {&curves.train, &curves.validation}) {
    for (const auto& [step, loss] : *curve) {
      if (!std::isfinite(loss)) continue;
      x_min = std::min(x_min, static_cast<double>(step));
      x_max = std::max(x_max, static_cast<double>(step));
      y_min = std::min(y_min, loss);
      y_max = std::max(y_max, loss);
    }
  }
  ADAMANT_CHECK(std::isfinite(y_min), "loss plot: every loss is NaN or infinite; nothing to draw for {}", png.string());
  const bool log_x = options.log_x;
  if (log_x) x_min = std::max(x_min, 1.0);
  if (x_max <= x_min) x_max = x_min + 1.0;
  if (y_max <= y_min) y_max = y_min + 1.0;
  const double y_pad = 0.05 * (y_max - y_min);
  y_min -= y_pad;
  y_max += y_pad;

  Canvas canvas(options.width, options.height);
  cairo_t* cr = canvas.cr();
  const double left = 90, right = options.width - 30.0, top = 60, bottom = options.height - 70.0;
  auto fx = [&](double step) {
    const double t =
        log_x ? (std::log10(std::max(step, 1.0)) - std::log10(x_min)) / (std::log10(x_max) - std::log10(x_min))
              : (step - x_min) / (x_max - x_min);
    return left + t * (right - left);
  };
  auto fy = [&](double loss) { return bottom - (loss - y_min) / (y_max - y_min) * (bottom - top); };

  canvas.color({1, 1, 1});
  cairo_paint(cr);
  canvas.color(kText);
  canvas.text(options.title, options.width / 2.0, 22, 20, 0.5, 0.0);

  // Grid and ticks.
  cairo_set_line_width(cr, 1.0);
  const double y_spacing = nice_spacing(y_max - y_min, 6);
  for (double y = std::ceil(y_min / y_spacing) * y_spacing; y <= y_max + 1e-12; y += y_spacing) {
    canvas.color(kGrid);
    cairo_move_to(cr, left, std::round(fy(y)) + 0.5);
    cairo_line_to(cr, right, std::round(fy(y)) + 0.5);
    cairo_stroke(cr);
    canvas.color(kText);
    canvas.text(tick_label(y, y_spacing), left - 8, fy(y), 13, 1.0, 0.5);
  }
  std::vector<double> x_ticks;
  double x_spacing = 1.0;
  if (log_x) {
    for (double decade = std::pow(10.0, std::floor(std::log10(x_min))); decade <= x_max; decade *= 10) {
      for (const double m : {1.0, 2.0, 5.0}) {
        if (m * decade >= x_min && m * decade <= x_max) x_ticks.push_back(m * decade);
      }
    }
  } else {
    x_spacing = std::max(1.0, nice_spacing(x_max - x_min, 8));
    for (double x = std::ceil(x_min / x_spacing) * x_spacing; x <= x_max + 1e-9; x += x_spacing) x_ticks.push_back(x);
  }
  for (const double x : x_ticks) {
    canvas.color(kGrid);
    cairo_move_to(cr, std::round(fx(x)) + 0.5, top);
    cairo_line_to(cr, std::round(fx(x)) + 0.5, bottom);
    cairo_stroke(cr);
    canvas.color(kText);
    canvas.text(tick_label(x, log_x ? 1.0 : x_spacing), fx(x), bottom + 8, 13, 0.5, 0.0);
  }
  canvas.color(kText);
  cairo_rectangle(cr, left + 0.5, top + 0.5, right - left, bottom - top);
  cairo_stroke(cr);
  canvas.text(log_x ? "step (log scale)" : "step", (left + right) / 2, options.height - 22.0, 15, 0.5, 1.0);
  canvas.text("loss", 24, (top + bottom) / 2, 15, 0.5, 0.5, true);

  // Curves, clipped to the plot area.
  cairo_save(cr);
  cairo_rectangle(cr, left, top, right - left, bottom - top);
  cairo_clip(cr);
  auto draw_line = [&](const std::vector<std::pair<std::int64_t, double>>& points, Color c, double width) {
    canvas.color(c);
    cairo_set_line_width(cr, width);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    bool pen_down = false;
    for (const auto& [step, loss] : points) {
      if (!std::isfinite(loss) || (log_x && step < 1)) {
        pen_down = false;  // a gap where the loss was not finite
        continue;
      }
      if (pen_down) {
        cairo_line_to(cr, fx(static_cast<double>(step)), fy(loss));
      } else {
        cairo_move_to(cr, fx(static_cast<double>(step)), fy(loss));
        pen_down = true;
      }
    }
    cairo_stroke(cr);
  };
  draw_line(curves.train, kTrainColor, 1.6);
  draw_line(curves.validation, kValidationColor, 2.0);
  for (const auto& [step, loss] : curves.validation) {
    if (!std::isfinite(loss) || (log_x && step < 1)) continue;
    cairo_arc(cr, fx(static_cast<double>(step)), fy(loss), 3.5, 0, 2 * M_PI);
    cairo_fill(cr);
  }
  cairo_restore(cr);

  // Legend, top right inside the plot.
  const double legend_x = right - 190, legend_y = top + 12;
  canvas.color({1, 1, 1});
  cairo_rectangle(cr, legend_x, legend_y, 176, 56);
  cairo_fill_preserve(cr);
  canvas.color({0.6, 0.6, 0.6});
  cairo_set_line_width(cr, 1.0);
  cairo_stroke(cr);
  const std::pair<const char*, Color> entries[] = {{"train loss", kTrainColor}, {"validation loss", kValidationColor}};
  for (int i = 0; i < 2; ++i) {
    const double y = legend_y + 18 + 22 * i;
    canvas.color(entries[i].second);
    cairo_set_line_width(cr, 2.5);
    cairo_move_to(cr, legend_x + 12, y);
    cairo_line_to(cr, legend_x + 44, y);
    cairo_stroke(cr);
    if (i == 1) {
      cairo_arc(cr, legend_x + 28, y, 3.5, 0, 2 * M_PI);
      cairo_fill(cr);
    }
    canvas.color(kText);
    canvas.text(entries[i].first, legend_x + 54, y, 14, 0.0, 0.5);
  }
  canvas.save(png);
}
#else
void plot_loss_curves(const LossCurves&, const std::filesystem::path& png, const PlotOptions&) {
  fail(
      "loss plot: this adamant was built without cairo, so {} cannot be drawn; install cairo's development "
      "files (Debian: libcairo2-dev) and build again",
      png.string());
}
#endif  // ADAMANT_HAVE_CAIRO

void draw_run_loss_curves(const std::filesystem::path& run_dir, bool report) {
  const std::filesystem::path png = run_dir / "loss.png";
  try {
    PlotOptions options;
    options.title = std::filesystem::absolute(run_dir).lexically_normal().filename().string() + ": loss";
    plot_loss_curves(read_loss_curves(run_dir / "metrics.jsonl"), png, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: no loss curve picture: %s\n", e.what());
    return;
  }
  if (report) {
    std::printf("loss curves: %s\nTensorBoard: tensorboard --logdir %s\n", png.string().c_str(),
                run_dir.string().c_str());
  }
}

}  // namespace adamant::train
