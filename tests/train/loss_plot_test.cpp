// Loss curves read from metrics.jsonl and drawn with cairo: the picture is read back and
// its pixels checked for both curves' colours where the points lie.
#include "adamant/train/loss_plot.h"

#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "adamant/core/error.h"

namespace adamant::train {
namespace {

std::filesystem::path temp_folder(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Pixels within a small distance of an RGB colour (0..255).
int count_colour(cairo_surface_t* image, int r, int g, int b) {
  const int width = cairo_image_surface_get_width(image), height = cairo_image_surface_get_height(image);
  const int stride = cairo_image_surface_get_stride(image);
  const unsigned char* data = cairo_image_surface_get_data(image);
  int count = 0;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      std::uint32_t pixel;
      std::memcpy(&pixel, data + y * stride + 4 * x, 4);
      const int pr = (pixel >> 16) & 0xFF, pg = (pixel >> 8) & 0xFF, pb = pixel & 0xFF;
      if (std::abs(pr - r) + std::abs(pg - g) + std::abs(pb - b) < 30) ++count;
    }
  }
  return count;
}

TEST(LossPlot, ReadsTheLatestValueOfEachStep) {
  const auto dir = temp_folder("adamant_loss_plot_read");
  std::ofstream(dir / "metrics.jsonl") << R"({"type":"train","step":1,"loss":10.5}
{"type":"train","step":2,"loss":9.0}
{"type":"validation","step":2,"val_loss":9.5}
{"type":"train","step":2,"loss":8.0}
{"type":"summary","steps":2}
)";
  const LossCurves curves = read_loss_curves(dir / "metrics.jsonl");
  ASSERT_EQ(curves.train.size(), 2u);
  EXPECT_EQ(curves.train[1], (std::pair<std::int64_t, double>{2, 8.0}));  // the step run again wins
  ASSERT_EQ(curves.validation.size(), 1u);
  EXPECT_EQ(curves.validation[0].second, 9.5);
  std::ofstream(dir / "broken.jsonl") << "{\"type\":\"train\"\n";
  EXPECT_THROW(read_loss_curves(dir / "broken.jsonl"), Error);
  EXPECT_THROW(read_loss_curves(dir / "absent.jsonl"), Error);
}

TEST(LossPlot, DrawsBothCurves) {
  const auto dir = temp_folder("adamant_loss_plot_draw");
  LossCurves curves;
  for (int step = 1; step <= 200; ++step) curves.train.emplace_back(step, 3.0 + 8.0 * std::exp(-step / 30.0));
  for (int step = 20; step <= 200; step += 20) curves.validation.emplace_back(step, 3.3 + 8.0 * std::exp(-step / 30.0));
  for (const bool log_x : {false, true}) {
    PlotOptions options;
    options.log_x = log_x;
    options.title = "test: loss";
    const auto png = dir / (log_x ? "log.png" : "linear.png");
    plot_loss_curves(curves, png, options);
    cairo_surface_t* image = cairo_image_surface_create_from_png(png.c_str());
    ASSERT_EQ(cairo_surface_status(image), CAIRO_STATUS_SUCCESS) << png;
    EXPECT_EQ(cairo_image_surface_get_width(image), options.width);
    EXPECT_EQ(cairo_image_surface_get_height(image), options.height);
    // A line across the plot is hundreds of pixels; the legend alone a few dozen.
    EXPECT_GT(count_colour(image, 31, 120, 181), 400) << "train curve in " << png;
    EXPECT_GT(count_colour(image, 227, 102, 13), 300) << "validation curve in " << png;
    cairo_surface_destroy(image);
    EXPECT_FALSE(std::filesystem::exists(png.string() + ".tmp"));
  }
  EXPECT_THROW(plot_loss_curves(LossCurves{}, dir / "empty.png", PlotOptions{}), Error);
  EXPECT_THROW(plot_loss_curves(curves, dir / "no_such_folder" / "loss.png", PlotOptions{}), Error);
}

}  // namespace
}  // namespace adamant::train
