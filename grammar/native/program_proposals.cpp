#include "program_proposals.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace cad::drafting {

namespace {

// Search limits of the reference drafter (``cad.selector.program_proposals``).
constexpr size_t kAnchor = 32;             // longest written tail looked up elsewhere
constexpr int64_t kStartWindow = 64;       // start lines looked at from the reached line
constexpr size_t kStartGuesses = 3;        // start lines proposed
constexpr size_t kUnknownStarts = 8;       // start lines for digits no guess starts with
constexpr size_t kNumbers = 256;           // numbers completing written digits
constexpr size_t kEndGuesses = 64;         // end lines proposed per start
constexpr int64_t kEndReach = 255;         // copy lengths looked at one by one
constexpr size_t kAnchorOccurrences = 64;  // occurrences of a tail looked at
constexpr size_t kAnchorsKept = 2;         // document anchors proposed
constexpr size_t kResumeLong = 6;          // a rejoining tail this long is the likelier kind

const std::string kGenOpen = "<gen>";
const std::string kGenClose = "</gen>\n";
const std::string kEnd = "</program>";
const std::string kCopyOpen = "<copy lines=\"";

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The value of decimal ``digits`` (at most 18 of them), -1 beyond.
int64_t parse_number(std::string_view digits) {
    if (digits.empty() || digits.size() > 18) return -1;
    int64_t value = 0;
    for (char c : digits) value = value * 10 + (c - '0');
    return value;
}

size_t decimal_length(int64_t value) { return std::to_string(value).size(); }

size_t common_bytes(std::string_view a, std::string_view b) {
    size_t size = 0;
    while (size < a.size() && size < b.size() && a[size] == b[size]) ++size;
    return size;
}

// Where ``original`` goes on once the line written so far has rejoined it after the change
// that began at byte ``same``: the end of the longest tail of ``partial`` found in
// ``original`` after the change, nearest the written length; with the tail's length.
bool resumption(std::string_view partial, std::string_view original, size_t same,
                size_t& end, size_t& size) {
    if (partial.size() <= same) return false;
    for (size = std::min(partial.size() - same, kAnchor); size > 0; --size) {
        const std::string_view tail = partial.substr(partial.size() - size);
        bool found = false;
        size_t best = 0;
        for (size_t start = original.find(tail, same); start != std::string_view::npos;
             start = original.find(tail, start + 1)) {
            const size_t candidate = start + size;
            if (candidate >= original.size()) continue;
            const auto distance = [&](size_t e) {
                return std::llabs(static_cast<long long>(e) - static_cast<long long>(partial.size()));
            };
            if (!found || distance(candidate) < distance(best)) best = candidate;
            found = true;
        }
        if (found) {
            end = best;
            return true;
        }
    }
    return false;
}

// What followed the last earlier occurrence of the longest tail of ``body`` (2 to kAnchor
// bytes) in the text the program generated, up to its line's end.
std::string output_repeat(const std::string& generated, std::string_view body) {
    const std::string written = generated + std::string(body);
    if (written.empty()) return {};
    const std::string_view searched = std::string_view(written).substr(0, written.size() - 1);
    for (size_t size = std::min(body.size(), kAnchor); size > 1; --size) {
        const size_t start = searched.rfind(body.substr(body.size() - size));
        if (start == std::string_view::npos) continue;
        const size_t end = written.find('\n', start + size);
        const size_t stop = end == std::string::npos ? written.size() : end + 1;
        std::string rest = written.substr(start + size, stop - start - size);
        if (!rest.empty()) return rest;
    }
    return {};
}

}  // namespace

ProgramDocument::ProgramDocument(std::vector<std::string> escaped,
                                 const std::vector<std::string>& plain)
    : line_bytes(std::move(escaped)) {
    line_offsets.push_back(0);
    for (const std::string& line : line_bytes) {
        text_bytes += line;
        line_offsets.push_back(static_cast<int64_t>(text_bytes.size()));
    }
    for (const std::string& line : plain) lines.push_back(decode_utf8(line));
}

ProgramProposals::ProgramProposals(ProgramDocument document, ProgramPrior prior)
    : document_(std::move(document)), prior_(std::move(prior)) {
    const std::string& text = document_.text_bytes;
    pair_begin_.assign(65537, 0);
    for (size_t e = 2; e <= text.size(); ++e) {
        ++pair_begin_[(static_cast<uint8_t>(text[e - 2]) << 8 | static_cast<uint8_t>(text[e - 1])) + 1];
    }
    for (size_t i = 1; i < pair_begin_.size(); ++i) pair_begin_[i] += pair_begin_[i - 1];
    pair_ends_.resize(text.size() >= 2 ? text.size() - 1 : 0);
    std::vector<uint32_t> filled(pair_begin_.begin(), pair_begin_.end() - 1);
    for (size_t e = 2; e <= text.size(); ++e) {
        const size_t pair = static_cast<uint8_t>(text[e - 2]) << 8 | static_cast<uint8_t>(text[e - 1]);
        pair_ends_[filled[pair]++] = static_cast<uint32_t>(e);
    }
}

int64_t ProgramProposals::line_after_gen(int64_t line, const CodePoints& text) const {
    thread_local std::vector<std::pair<size_t, size_t>> pieces;
    split_lines_keepends(text, pieces);
    const int64_t n = document_.n_lines();
    for (const auto& [begin, end] : pieces) {
        const uint32_t* written = text.data() + begin;
        const size_t size = end - begin;
        if (line <= n) {
            const CodePoints& original = document_.lines[static_cast<size_t>(line - 1)];
            if (resembles(written, size, original.data(), original.size())) {
                line += 1;
                continue;
            }
        }
        if (line < n) {
            const CodePoints& next = document_.lines[static_cast<size_t>(line)];
            if (resembles(written, size, next.data(), next.size())) line += 2;
        }
    }
    return line;
}

ProgramContext ProgramProposals::after(const ProgramContext& before, const OpView& op) const {
    ProgramContext context = before;
    context.has_ops = true;
    context.last_gen = op.kind == OpKind::Gen;
    switch (op.kind) {
        case OpKind::Lines:
            context.cursor = op.values[1] + 1;
            break;
        case OpKind::Span: {
            const CodePoints& line = document_.lines[static_cast<size_t>(op.values[2] - 1)];
            context.cursor = op.values[2] + (op.values[3] >= static_cast<int64_t>(line.size()) ? 1 : 0);
            break;
        }
        case OpKind::Gen:
            context.cursor = line_after_gen(before.cursor, decode_utf8(unescape_gen_body(op.body)));
            context.generated += op.body;
            break;
        case OpKind::End:
            break;
    }
    return context;
}

int32_t ProgramProposals::previous_of(const ProgramContext& context) const {
    if (context.cursor > document_.n_lines()) return PastEnd;
    if (!context.has_ops) return AfterStart;
    return context.last_gen ? AfterGen : AfterCopy;
}

void ProgramProposals::collect(const ProgramContext& context, std::string_view prefix,
                               std::vector<ProposalRuns::Copies>& copies,
                               std::vector<Proposal>& others) const {
    copies.clear();
    others.clear();
    if (starts_with(prefix, kGenOpen)) {
        body_proposals(context, prefix.substr(kGenOpen.size()), 1.0, others);
        return;
    }
    const std::array<double, 3>& kinds = prior_.next_op[static_cast<size_t>(previous_of(context))];
    if (kinds[NextCopy] > 0 && document_.n_lines()) {
        copy_runs(context, prefix, kinds[NextCopy], copies);
    }
    if (kinds[NextGen] > 0 && starts_with(kGenOpen, prefix)) {
        body_proposals(context, {}, kinds[NextGen], others);
    }
    if (kinds[NextEnd] > 0) {
        Proposal& end = others.emplace_back();
        end.text = kEnd;
        end.mass = kinds[NextEnd];
    }
    others.erase(std::remove_if(others.begin(), others.end(),
                                [prefix](const Proposal& p) {
                                    return !starts_with(p.text, prefix) ||
                                           p.text.size() <= prefix.size();
                                }),
                 others.end());
}

void ProgramProposals::runs(const ProgramContext& context, std::string_view prefix,
                            ProposalRuns& out) const {
    collect(context, prefix, out.copies, out.others);
    out.other = 0;
    out.prefix.assign(prefix);
    std::stable_sort(out.others.begin(), out.others.end(),
                     [](const Proposal& a, const Proposal& b) { return -a.mass < -b.mass; });
}

const Proposal* ProposalRuns::next() {
    std::string buffer;
    while (true) {
        Copies* best = nullptr;
        double best_mass = 0.0;
        for (Copies& run : copies) {
            if (run.position >= run.ends->size()) continue;
            const double mass = run.mass * (*run.ends)[run.position].second;
            if (best == nullptr || -mass < -best_mass) {
                best = &run;
                best_mass = mass;
            }
        }
        if (other < others.size() && (best == nullptr || -others[other].mass < -best_mass)) {
            return &others[other++];
        }
        if (best == nullptr) return nullptr;
        copy.op.kind = OpKind::Lines;
        copy.op.values = {best->start, (*best->ends)[best->position].first, 0, 0};
        copy.mass = best_mass;
        ++best->position;
        const std::string_view text = copy.text_in(buffer);
        if (starts_with(text, prefix) && text.size() > prefix.size()) return &copy;
    }
}

void ProgramProposals::proposals(const ProgramContext& context, std::string_view prefix,
                                 std::vector<Proposal>& out) const {
    std::vector<ProposalRuns::Copies> copies;
    std::vector<Proposal> others;
    collect(context, prefix, copies, others);
    out.clear();
    std::string buffer;
    for (const ProposalRuns::Copies& run : copies) {
        for (const auto& [end, end_mass] : *run.ends) {
            Proposal proposal;
            proposal.op.kind = OpKind::Lines;
            proposal.op.values = {run.start, end, 0, 0};
            proposal.mass = run.mass * end_mass;
            const std::string_view text = proposal.text_in(buffer);
            if (starts_with(text, prefix) && text.size() > prefix.size()) {
                out.push_back(std::move(proposal));
            }
        }
    }
    for (Proposal& proposal : others) out.push_back(std::move(proposal));
}

std::string_view Proposal::text_in(std::string& buffer) const {
    if (op.kind != OpKind::Lines) return text;
    buffer.assign(kCopyOpen);
    buffer += std::to_string(op.values[0]);
    buffer += '-';
    buffer += std::to_string(op.values[1]);
    buffer += "\"/>\n";
    return buffer;
}

void ProgramProposals::copy_runs(const ProgramContext& context, std::string_view prefix,
                                 double mass, std::vector<ProposalRuns::Copies>& out) const {
    std::string_view start_digits;
    std::string_view end_digits;
    bool complete = false;
    bool matched = false;
    if (starts_with(prefix, kCopyOpen)) {
        const std::string_view rest = prefix.substr(kCopyOpen.size());
        size_t i = 0;
        while (i < rest.size() && is_digit(rest[i])) ++i;
        if (i == rest.size()) {
            matched = true;
        } else if (rest[i] == '-') {
            size_t j = i + 1;
            while (j < rest.size() && is_digit(rest[j])) ++j;
            if (j == rest.size()) {
                matched = true;
                complete = true;
                end_digits = rest.substr(i + 1);
            }
        }
        if (matched) start_digits = rest.substr(0, i);
    }
    if (!matched && !starts_with(kCopyOpen, prefix)) return;
    const int32_t previous = previous_of(context);
    thread_local std::vector<std::pair<int64_t, double>> starts;
    start_lines(context.cursor, previous, start_digits, complete, starts);
    for (const auto& [start, start_mass] : starts) {
        out.push_back({start, mass * start_mass, &end_lines(start, end_digits), 0});
    }
}

void ProgramProposals::start_lines(int64_t cursor, int32_t previous, std::string_view digits,
                                   bool complete,
                                   std::vector<std::pair<int64_t, double>>& out) const {
    out.clear();
    const int64_t n = document_.n_lines();
    if (complete) {
        const int64_t value = parse_number(digits);
        if (value >= 1 && value <= n) out.emplace_back(value, 1.0);
        return;
    }
    const bool after_copy = previous == AfterCopy;
    const int64_t low = std::max<int64_t>(1, std::max<int64_t>(1, cursor - kStartReach));
    for (int64_t line = low; line <= std::min(n, low + kStartWindow); ++line) {
        if (!starts_with(std::to_string(line), digits)) continue;
        const double mass = prior_.start_line_mass(cursor, line, after_copy);
        if (mass > 0) out.emplace_back(line, mass);
    }
    if (!digits.empty() && out.empty()) {
        thread_local std::vector<int64_t> lines;
        numbers_with_prefix(digits, 1, n, lines);
        const size_t take = std::min(lines.size(), kUnknownStarts);
        for (size_t i = 0; i < take; ++i) {
            out.emplace_back(lines[i], 1.0 / static_cast<double>(lines.size()));
        }
        return;
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return -a.second < -b.second; });
    if (out.size() > kStartGuesses) out.resize(kStartGuesses);
}

void ProgramProposals::numbers_with_prefix(std::string_view digits, int64_t low, int64_t high,
                                           std::vector<int64_t>& out) const {
    out.clear();
    const int64_t value = parse_number(digits);
    if (value < 0) return;
    const int64_t extras = static_cast<int64_t>(decimal_length(high)) -
                           static_cast<int64_t>(digits.size());
    int64_t scale = 1;
    for (int64_t extra = 0; extra <= extras; ++extra, scale *= 10) {
        const int64_t first = std::max(low, value * scale);
        const int64_t last = std::min(high, (value + 1) * scale - 1);
        for (int64_t number = first; number <= last && out.size() <= kNumbers; ++number) {
            out.push_back(number);
        }
        if (out.size() > kNumbers) break;
    }
    if (out.size() > kNumbers) out.resize(kNumbers);
}

const std::vector<std::pair<int64_t, double>>& ProgramProposals::end_lines(
    int64_t start, std::string_view digits) const {
    std::string key = std::to_string(start);
    key += ':';
    key += digits;
    auto [found, fresh] = ends_.try_emplace(std::move(key));
    std::vector<std::pair<int64_t, double>>& out = found->second;
    if (!fresh) return out;
    const int64_t n = document_.n_lines();
    thread_local std::vector<int64_t> lines;
    if (!digits.empty()) {
        numbers_with_prefix(digits, start, n, lines);
        lines.erase(std::remove_if(lines.begin(), lines.end(),
                                   [start](int64_t end) { return end < start; }),
                    lines.end());
    } else {
        lines.clear();
        for (int64_t end = start; end <= std::min(n, start + kEndReach); ++end) lines.push_back(end);
        if (std::find(lines.begin(), lines.end(), n) == lines.end()) lines.push_back(n);
    }
    double total = 0.0;
    for (int64_t end : lines) {
        const double mass = prior_.end_line_mass(start, end, n);
        if (mass > 0) {
            out.emplace_back(end, mass);
            total += mass;
        }
    }
    if (!digits.empty() && total > 0) {
        for (auto& item : out) item.second /= total;
    }
    const auto likelier = [](const auto& a, const auto& b) {
        if (a.second != b.second) return -a.second < -b.second;
        return a.first < b.first;
    };
    const size_t kept = std::min(out.size(), kEndGuesses);
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(kept), out.end(),
                      likelier);
    out.resize(kept);
    return out;
}

Proposal ProgramProposals::gen_proposal(std::string text, double mass) const {
    Proposal proposal;
    proposal.op.kind = OpKind::Gen;
    proposal.op.body = text.substr(kGenOpen.size(), text.size() - kGenOpen.size() - kGenClose.size());
    proposal.text = std::move(text);
    proposal.mass = mass;
    proposal.rate = prior_.body_rate;
    return proposal;
}

void ProgramProposals::body_proposals(const ProgramContext& context, std::string_view body,
                                      double mass, std::vector<Proposal>& out) const {
    const size_t newline = body.rfind('\n');
    std::string_view partial = body;
    int64_t line = context.cursor;
    if (newline != std::string_view::npos) {
        partial = body.substr(newline + 1);
        line = line_after_gen(context.cursor, decode_utf8(body.substr(0, newline + 1)));
    }
    const double close = prior_.gen_close;
    const std::string stem_head = kGenOpen + std::string(body);
    if (!body.empty() && partial.empty()) {
        out.push_back(gen_proposal(stem_head + kGenClose, mass * close));
        mass *= 1.0 - close;
    }
    thread_local std::vector<Rest> rests;
    line_rests(context, body, partial, line, rests);
    const int64_t n = document_.n_lines();
    for (const Rest& rest : rests) {
        const std::string stem = stem_head + rest.text;
        out.push_back(gen_proposal(stem + kGenClose, mass * rest.share * close));
        if (rest.following <= n) {
            const std::string& next = document_.line_bytes[static_cast<size_t>(rest.following - 1)];
            out.push_back(gen_proposal(stem + next + kGenClose, mass * rest.share * (1.0 - close)));
        }
    }
}

void ProgramProposals::line_rests(const ProgramContext& context, std::string_view body,
                                  std::string_view partial, int64_t line,
                                  std::vector<Rest>& out) const {
    out.clear();
    auto add = [&out](std::string_view rest, int64_t following, double share) {
        if (rest.empty()) return;
        for (const Rest& known : out) {
            if (known.text == rest) return;
        }
        out.push_back({std::string(rest), following, share});
    };
    const int64_t n = document_.n_lines();
    for (int side = 0; side < 2; ++side) {
        const int64_t target = line + side;
        const double share = prior_.line_shares[static_cast<size_t>(side)];
        if (target > n) continue;
        const std::string_view original = document_.line_bytes[static_cast<size_t>(target - 1)];
        if (starts_with(original, partial)) {
            add(original.substr(partial.size()), target + 1, share);
            continue;
        }
        const size_t same = common_bytes(partial, original);
        size_t end = 0;
        size_t size = 0;
        if (resumption(partial, original, same, end, size)) {
            const double resumed = size >= kResumeLong ? prior_.resume_shares[0] : prior_.resume_shares[1];
            add(original.substr(end), target + 1, share * resumed);
        }
        const int64_t changed = static_cast<int64_t>(partial.size()) - static_cast<int64_t>(same);
        const std::array<int64_t, 7> skips = {changed, 0, 1, 2, 3, changed - 1, changed + 1};
        for (size_t k = 0; k < skips.size(); ++k) {
            if (skips[k] < 0) continue;
            const size_t from = same + static_cast<size_t>(skips[k]);
            if (from >= original.size()) continue;
            add(original.substr(from), target + 1, share * prior_.skip_shares[k]);
        }
    }
    thread_local std::vector<int64_t> anchors;
    document_anchors(partial, line, anchors);
    const std::vector<int64_t>& offsets = document_.line_offsets;
    for (int64_t offset : anchors) {
        const auto found = static_cast<int64_t>(
            std::upper_bound(offsets.begin(), offsets.end(), offset) - offsets.begin());
        const std::string_view text = document_.text_bytes;
        add(text.substr(static_cast<size_t>(offset),
                        static_cast<size_t>(offsets[static_cast<size_t>(found)] - offset)),
            found + 1, prior_.anchor_share);
    }
    const std::string repeat = output_repeat(context.generated, body);
    if (!repeat.empty()) add(repeat, line + 1, prior_.repeat_share);
    double total = 0.0;
    for (const Rest& rest : out) total += rest.share;
    total = std::max(1.0, total);
    for (Rest& rest : out) rest.share /= total;
}

void ProgramProposals::document_anchors(std::string_view partial, int64_t line,
                                        std::vector<int64_t>& out) const {
    out.clear();
    if (partial.size() < 2) return;
    const std::string& text = document_.text_bytes;
    const int64_t n = document_.n_lines();
    const int64_t near = document_.line_offsets[static_cast<size_t>(std::min(line, n + 1) - 1)];
    const size_t cap = std::min(partial.size(), kAnchor);
    const size_t pair = static_cast<uint8_t>(partial[partial.size() - 2]) << 8 |
                        static_cast<uint8_t>(partial[partial.size() - 1]);
    const uint32_t* first = pair_ends_.data() + pair_begin_[pair];
    const uint32_t* last = pair_ends_.data() + pair_begin_[pair + 1];
    // The longest tail (2 to cap bytes) with a usable occurrence: every occurrence of a longer
    // tail is one of the shorter, so it is the longest match found at any usable end.
    auto usable = [&text](uint32_t end) { return end < text.size() && text[end - 1] != '\n'; };
    auto matched = [&](uint32_t end) {
        size_t size = 0;
        while (size < cap && size < end && text[end - 1 - size] == partial[partial.size() - 1 - size]) {
            ++size;
        }
        return size;
    };
    size_t best = 0;
    for (const uint32_t* at = first; at != last; ++at) {
        if (usable(*at)) best = std::max(best, matched(*at));
    }
    if (best < 2) return;
    for (const uint32_t* at = first; at != last && out.size() < kAnchorOccurrences; ++at) {
        if (usable(*at) && matched(*at) >= best) out.push_back(*at);
    }
    std::stable_sort(out.begin(), out.end(), [near](int64_t a, int64_t b) {
        return std::llabs(a - near) < std::llabs(b - near);
    });
    if (out.size() > kAnchorsKept) out.resize(kAnchorsKept);
}

}  // namespace cad::drafting
