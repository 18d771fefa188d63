// --timeline=FILE.svg: the last step's pool events replayed per tag, drawn
// as a well-formed SVG (checked by a small XML reader here) whose stacked
// areas move left to right and whose peak label is the replay's peak.
#include "footprint/timeline_svg.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "footprint/cli.h"
#include "footprint/presets.h"
#include "footprint/report.h"
#include "footprint/svg.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

using ::testing::HasSubstr;

// Well-formed XML, structurally: every element closed in order, attributes
// quoted, one root. Returns the element names in document order, or an
// error naming the first problem.
absl::StatusOr<std::vector<std::string>> Elements(const std::string& xml) {
  std::vector<std::string> open, all;
  size_t i = 0;
  int roots = 0;
  while ((i = xml.find('<', i)) != std::string::npos) {
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return absl::InvalidArgumentError("unclosed tag");
    const std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        return absl::InvalidArgumentError("</" + tag.substr(1) + "> closes nothing open");
      }
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) {
      return absl::InvalidArgumentError("unbalanced quotes in <" + name + ">");
    }
    if (open.empty() && ++roots > 1) return absl::InvalidArgumentError("two roots");
    all.push_back(name);
    if (tag.back() != '/') open.push_back(name);
  }
  if (!open.empty()) return absl::InvalidArgumentError("<" + open.back() + "> never closed");
  return all;
}

StepTimeline Record(const ModelSpec& model, Checkpointing checkpointing) {
  const Experiment e{&model,
                     8,
                     3,
                     Precision::kBF16,
                     OptimizerKind::kAdam,
                     Offload::kNone,
                     ActivationOptions{.seq = 512, .micro_batch = 2, .checkpointing = checkpointing}};
  StepTimeline timeline;
  absl::StatusOr<Measurement> m = RunExperiment(e, Knobs{}, &timeline);
  EXPECT_TRUE(m.ok()) << m.status();
  return timeline;
}

TEST(TimelineTest, ReplayCoversTheStepAndReturnsToItsStart) {
  const ModelSpec model = *Preset("gpt2-small");
  const StepTimeline t = Record(model, Checkpointing::kNone);
  ASSERT_GT(t.events.size(), 100u);
  EXPECT_LT(t.backward, t.optimizer);
  EXPECT_LE(t.optimizer, t.events.size());
  const TagSeries s = Replay(t);
  ASSERT_EQ(s.bytes.size(), s.event.size());
  // Activations come and go within the step; model states stay.
  EXPECT_EQ(s.bytes.back()[static_cast<int>(Tag::kActivations)], 0u);
  EXPECT_EQ(t.start[static_cast<int>(Tag::kActivations)], 0u);
  size_t most = 0;
  for (const auto& b : s.bytes) most = std::max(most, b[static_cast<int>(Tag::kActivations)]);
  EXPECT_GT(most, 0u);
  EXPECT_EQ(s.bytes.back()[static_cast<int>(Tag::kParameters)],
            t.start[static_cast<int>(Tag::kParameters)]);
}

TEST(TimelineTest, TheSvgIsWellFormedMovesRightAndLabelsThePeak) {
  const ModelSpec model = *Preset("gpt2-small");
  const StepTimeline t = Record(model, Checkpointing::kFull);
  const std::string svg = TimelineSvg(t, "gpt2-small <test> & co");
  absl::StatusOr<std::vector<std::string>> elements = Elements(svg);
  ASSERT_TRUE(elements.ok()) << elements.status();
  EXPECT_EQ(elements->front(), "svg");
  EXPECT_THAT(svg, HasSubstr("gpt2-small &lt;test&gt; &amp; co"));
  // Each area's upper edge goes left to right. (Scanned by hand: libstdc++'s
  // std::regex recurses once per character and a points list overflows the
  // stack under ASan.)
  int areas = 0;
  constexpr std::string_view kArea = "class=\"area\" fill=\"", kPoints = "\" points=\"";
  for (size_t at = svg.find(kArea); at != std::string::npos; at = svg.find(kArea, at + 1)) {
    const size_t open = svg.find(kPoints, at + kArea.size());
    ASSERT_NE(open, std::string::npos) << "an area without points";
    ASSERT_EQ(svg.find('"', at + kArea.size()), open) << "the fill is one attribute value";
    const size_t begin = open + kPoints.size(), close = svg.find('"', begin);
    ASSERT_NE(close, std::string::npos);
    ++areas;
    const std::vector<std::string> points = absl::StrSplit(svg.substr(begin, close - begin), ' ');
    double last = -1;
    for (size_t i = 0; i < points.size() / 2; ++i) {
      double x;
      ASSERT_TRUE(absl::SimpleAtod(points[i].substr(0, points[i].find(',')), &x));
      EXPECT_GE(x, last);
      last = x;
    }
  }
  EXPECT_GE(areas, 4);  // parameters, gradients, optimizer state, activations, ...
  // The label is the replay's peak.
  const TagSeries s = Replay(t);
  size_t peak = 0;
  for (const auto& b : s.bytes) {
    size_t total = 0;
    for (size_t v : b) total += v;
    peak = std::max(peak, total);
  }
  EXPECT_THAT(svg, HasSubstr("<text id=\"peak\""));
  EXPECT_THAT(svg, HasSubstr(">peak " + FormatGB(static_cast<double>(peak)) + " GB ("));
  for (const char* phase : {">forward<", ">backward<"}) EXPECT_THAT(svg, HasSubstr(phase));
}

TEST(TimelineTest, CliWritesItForOneRunAndRefusesASweep) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/step.svg";
  std::ostringstream out, err;
  int code = RunFootprint({"--model=gpt2-small", "--ranks=4", "--stage=2", "--seq=256",
                           "--timeline=" + path},
                          out, err);
  ASSERT_EQ(code, 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("wrote " + path));
  std::ifstream in(path);
  std::stringstream svg;
  svg << in.rdbuf();
  EXPECT_TRUE(Elements(svg.str()).ok());
  EXPECT_THAT(svg.str(), HasSubstr("gpt2-small N=4 stage 2 bf16 adam seq=256 mb=1 sdpa"));
  std::ostringstream out2, err2;
  code = RunFootprint({"--model=gpt2-small", "--ranks=4", "--stage=2,3", "--timeline=" + path},
                      out2, err2);
  EXPECT_EQ(code, 2);
  EXPECT_EQ(err2.str(),
            "footprint: --timeline: draws one run, and the options make 2 (give one value to "
            "each list)\n");
}

// Names come from file names: any bytes. What XML cannot hold (bytes that
// are not UTF-8, control characters) becomes U+FFFD; markup is escaped.
TEST(SvgTest, XmlEscapeKeepsTheDocumentWellFormed) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(XmlEscape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
  EXPECT_EQ(XmlEscape("bad\xffname\x01"), "bad" + fffd + "name" + fffd);
  EXPECT_EQ(XmlEscape("tab\there \xc3\xa9"), "tab\there \xc3\xa9");
}

}  // namespace
}  // namespace zero::footprint
