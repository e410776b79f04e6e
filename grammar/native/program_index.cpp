#include "program_index.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "fnv1a.h"
#include "trie_walk.h"

namespace cad::program {

namespace {

constexpr size_t kMaxDigitToken = 18;
constexpr char kMagic[8] = {'C', 'A', 'D', 'P', 'I', 'D', 'X', '\0'};
constexpr uint32_t kFormatVersion = 2;

uint64_t pow10(int exponent) {
    uint64_t result = 1;
    for (int i = 0; i < exponent; ++i) result *= 10;
    return result;
}

bool is_digit_token(std::string_view bytes) {
    if (bytes.empty() || bytes.size() > kMaxDigitToken) return false;
    return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Walks the trie under the program's byte transitions; a config is an index into ``entries``
// (the states along the current path), so backtracking is a resize.
class StateWalker {
  public:
    struct Entry {
        State state;
        bool touched;   // a byte of the path was read inside a number
        bool op_ended;  // the path ends an op: no longer token may go on
    };
    template <class OnAccept>
    StateWalker(const Structure& structure, OnAccept on_accept)
        : structure_(structure), on_accept_(std::move(on_accept)) {}

    int32_t start(const State& state) {
        entries_.clear();
        entries_.push_back({state, false, false});
        return 0;
    }
    int32_t step(int32_t config, uint8_t byte) {
        const Entry parent = entries_[config];
        const std::optional<Step> stepped = structure_.step(parent.state, byte);
        if (!stepped) return kDead;
        entries_.push_back(
            {stepped->state, parent.touched || parent.state.mode == Mode::Number, stepped->op_ended});
        return static_cast<int32_t>(entries_.size() - 1);
    }
    bool descend(int32_t config) const { return !entries_[config].op_ended; }
    void accept(uint32_t node, int32_t config) { on_accept_(node, entries_[config]); }
    void dependent(uint32_t, int32_t) {}
    size_t mark() const { return entries_.size(); }
    void release(size_t mark) { entries_.resize(mark); }

  private:
    const Structure& structure_;
    std::function<void(uint32_t, const Entry&)> on_accept_;
    std::vector<Entry> entries_;
};

// Appends plain values to a byte buffer and reads them back with bounds checks.
class Writer {
  public:
    template <class T>
    void put(const T& value) {
        out.append(reinterpret_cast<const char*>(&value), sizeof(T));
    }
    template <class T>
    void put_all(const std::vector<T>& values) {
        out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    }
    std::string out;
};

class Reader {
  public:
    explicit Reader(const std::string& blob) : blob_(blob) {}
    template <class T>
    T get() {
        T value;
        take(&value, sizeof(T));
        return value;
    }
    template <class T>
    void get_all(std::vector<T>& values, size_t count) {
        if (count > (blob_.size() - position_) / sizeof(T)) fail();
        values.resize(count);
        take(values.data(), count * sizeof(T));
    }
    size_t position() const { return position_; }
    [[noreturn]] static void fail() {
        throw std::invalid_argument("the program token index data is corrupt or truncated");
    }

  private:
    void take(void* target, size_t size) {
        if (size > blob_.size() - position_) fail();
        std::memcpy(target, blob_.data() + position_, size);
        position_ += size;
    }
    const std::string& blob_;
    size_t position_ = 0;
};

uint64_t checksum(const char* data, size_t size) {
    return fnv1a::bytes(fnv1a::kOffsetBasis, std::string_view(data, size));
}

}  // namespace

ProgramIndex::ProgramIndex(const TokenTrie& trie) : table_(trie.shared_table()) {
    const int32_t vocab = vocab_size();
    WalkScratch frames;

    std::vector<bool> digit_token(vocab, false);
    for (int32_t id = 0; id < vocab; ++id) {
        const std::string_view bytes = table_->token(id);
        if (!is_digit_token(bytes)) continue;
        digit_token[id] = true;
        if (digit_groups_.size() < bytes.size()) digit_groups_.resize(bytes.size());
        DigitGroup& group = digit_groups_[bytes.size() - 1];
        group.length = static_cast<int>(bytes.size());
        group.values.push_back(std::stoull(std::string(bytes)));
        group.ids.push_back(id);
    }
    for (DigitGroup& group : digit_groups_) {
        std::vector<size_t> order(group.ids.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(),
                         [&group](size_t a, size_t b) { return group.values[a] < group.values[b]; });
        DigitGroup sorted;
        sorted.length = group.length;
        for (size_t i : order) {
            sorted.values.push_back(group.values[i]);
            sorted.ids.push_back(group.ids[i]);
        }
        group = std::move(sorted);
    }
    digit_groups_.erase(std::remove_if(digit_groups_.begin(), digit_groups_.end(),
                                       [](const DigitGroup& group) { return group.ids.empty(); }),
                        digit_groups_.end());

    const Structure gen_structure = Structure::shape(false, false);
    for (int slot = 0; slot < 13; ++slot) {
        TokenSet& tokens = gen_[slot] = TokenSet(vocab);
        StateWalker walker(gen_structure, [&](uint32_t node, const StateWalker::Entry&) {
            for (const int32_t* id = trie.tokens_begin(node); id != trie.tokens_end(node); ++id) {
                tokens.add(*id);
            }
        });
        State start;
        start.mode = Mode::Gen;
        start.pending = static_cast<uint8_t>(slot < 6 ? 0 : slot - 5);
        start.matched = static_cast<uint8_t>(slot < 6 ? slot : 0);
        walk_subtree(trie, 0, walker.start(start), walker, frames);
    }

    for (int key = 0; key < 4; ++key) {
        const Structure shape = Structure::shape(key & 2, key & 1);
        for (int slot = 0; slot < kShapeSlots; ++slot) {
            const std::optional<State> start = shape.representative(slot);
            if (!start) continue;
            ShapeEntry& entry = shapes_[key][slot];
            entry.present = true;
            entry.fixed = TokenSet(vocab);
            if (start->mode == Mode::End) {
                if (table_->eos() >= 0) entry.fixed.add(table_->eos());
                continue;
            }
            const bool skip_digits = start->mode == Mode::Number;
            StateWalker walker(shape, [&](uint32_t node, const StateWalker::Entry& reached) {
                for (const int32_t* id = trie.tokens_begin(node); id != trie.tokens_end(node); ++id) {
                    if (skip_digits && digit_token[*id]) continue;
                    if (reached.touched) {
                        entry.dynamic.push_back(*id);
                    } else {
                        entry.fixed.add(*id);
                    }
                }
            });
            walk_subtree(trie, 0, walker.start(*start), walker, frames);
        }
    }
    build_multi(trie, digit_token);
}

void ProgramIndex::fill(const Structure& structure, const State& state, uint32_t* row) const {
    if (state.mode == Mode::Gen) {
        gen_[gen_slot(state)].write(row);
        return;
    }
    const ShapeEntry& entry = shapes_[structure.shape_key()][shape_slot(state)];
    if (!entry.present) throw std::logic_error("program state outside the index");
    entry.fixed.write(row);
    if (state.mode == Mode::Number) {
        const auto [low, high] = structure.bounds(state.kind, state.field_count, state.values);
        add_digit_tokens(row, state.digit_count, state.digits, low, high);
    }
    for (int32_t id : entry.dynamic) {
        const std::string_view bytes = table_->token(id);
        if (structure.walk(state, bytes.data(), bytes.size(), false)) set_token(row, id);
    }
}

void ProgramIndex::add_digit_tokens(uint32_t* row, int digit_count, uint64_t digits,
                                    uint64_t low, uint64_t high) const {
    if (low > high) return;
    const int width = decimal_length(high);
    const uint64_t base = digit_count ? digits : 0;
    for (const DigitGroup& group : digit_groups_) {
        const int total = digit_count + group.length;
        if (total > width) continue;
        const uint64_t shift = base * pow10(group.length);
        // Without digits read yet, a leading zero is not allowed.
        uint64_t smallest = 0;
        if (digit_count == 0) smallest = group.length == 1 ? 1 : pow10(group.length - 1);
        for (int extra = 0; extra <= width - total; ++extra) {
            const uint64_t scale = pow10(extra);
            const uint64_t grown_low = low / scale;
            const uint64_t grown_high = high / scale;
            if (grown_high < shift) continue;
            const uint64_t value_low = std::max(smallest, grown_low > shift ? grown_low - shift : 0);
            const uint64_t value_high = grown_high - shift;
            if (value_low > value_high) continue;
            auto first = std::lower_bound(group.values.begin(), group.values.end(), value_low);
            auto last = std::upper_bound(first, group.values.end(), value_high);
            for (auto it = first; it != last; ++it) {
                set_token(row, group.ids[static_cast<size_t>(it - group.values.begin())]);
            }
        }
    }
}

std::string ProgramIndex::serialize() const {
    Writer writer;
    writer.out.append(kMagic, sizeof(kMagic));
    writer.put(kFormatVersion);
    writer.put(table_->fingerprint());
    writer.put(vocab_size());
    for (const TokenSet& tokens : gen_) writer.put_all(tokens.words);
    for (const auto& entries : shapes_) {
        for (const ShapeEntry& entry : entries) {
            writer.put(static_cast<uint8_t>(entry.present));
            if (!entry.present) continue;
            writer.put_all(entry.fixed.words);
            writer.put(static_cast<uint32_t>(entry.dynamic.size()));
            writer.put_all(entry.dynamic);
        }
    }
    for (const ShapeEntry& entry : multi_) {
        writer.put(static_cast<uint8_t>(entry.present));
        if (!entry.present) continue;
        writer.put_all(entry.fixed.words);
        writer.put(static_cast<uint32_t>(entry.dynamic.size()));
        writer.put_all(entry.dynamic);
    }
    writer.put(static_cast<uint32_t>(digit_groups_.size()));
    for (const DigitGroup& group : digit_groups_) {
        writer.put(static_cast<uint32_t>(group.length));
        writer.put(static_cast<uint32_t>(group.ids.size()));
        writer.put_all(group.values);
        writer.put_all(group.ids);
    }
    writer.put(checksum(writer.out.data(), writer.out.size()));
    return std::move(writer.out);
}

ProgramIndex::ProgramIndex(std::shared_ptr<const TokenTable> table, const std::string& blob)
    : table_(std::move(table)) {
    if (blob.size() < sizeof(kMagic) + sizeof(uint64_t) ||
        std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0) {
        Reader::fail();
    }
    const size_t body = blob.size() - sizeof(uint64_t);
    uint64_t stored;
    std::memcpy(&stored, blob.data() + body, sizeof(stored));
    if (stored != checksum(blob.data(), body)) Reader::fail();
    Reader reader(blob);
    reader.get<std::array<char, sizeof(kMagic)>>();
    if (reader.get<uint32_t>() != kFormatVersion) {
        throw std::invalid_argument("the program token index has another format version");
    }
    if (reader.get<uint64_t>() != table_->fingerprint() || reader.get<int32_t>() != vocab_size()) {
        throw std::invalid_argument("the program token index belongs to another vocabulary");
    }
    const size_t words = bitmask_words(vocab_size());
    auto valid_id = [this](int32_t id) { return id >= 0 && id < vocab_size(); };
    for (TokenSet& tokens : gen_) reader.get_all(tokens.words, words);
    for (auto& entries : shapes_) {
        for (ShapeEntry& entry : entries) {
            entry.present = reader.get<uint8_t>() != 0;
            if (!entry.present) continue;
            reader.get_all(entry.fixed.words, words);
            reader.get_all(entry.dynamic, reader.get<uint32_t>());
            if (!std::all_of(entry.dynamic.begin(), entry.dynamic.end(), valid_id)) Reader::fail();
        }
    }
    for (ShapeEntry& entry : multi_) {
        entry.present = reader.get<uint8_t>() != 0;
        if (!entry.present) continue;
        reader.get_all(entry.fixed.words, words);
        reader.get_all(entry.dynamic, reader.get<uint32_t>());
        if (!std::all_of(entry.dynamic.begin(), entry.dynamic.end(), valid_id)) Reader::fail();
    }
    digit_groups_.resize(reader.get<uint32_t>());
    for (DigitGroup& group : digit_groups_) {
        group.length = static_cast<int>(reader.get<uint32_t>());
        const uint32_t count = reader.get<uint32_t>();
        reader.get_all(group.values, count);
        reader.get_all(group.ids, count);
        if (group.length < 1 || group.length > static_cast<int>(kMaxDigitToken) ||
            !std::is_sorted(group.values.begin(), group.values.end()) ||
            !std::all_of(group.ids.begin(), group.ids.end(), valid_id)) {
            Reader::fail();
        }
    }
    if (reader.position() != body) Reader::fail();
}

}  // namespace cad::program
