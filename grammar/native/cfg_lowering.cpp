// Lowering and clean-up of grammar expressions (see cfg_lowering.h). Every step follows the
// Python reference exactly, down to the order in which nonterminals and terminals are
// numbered, so that both give the same Grammar.
#include "cfg_lowering.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <unordered_map>

#include "fnv1a.h"

namespace cad::cfg {

namespace {

using Symbols = std::vector<int32_t>;

struct SymbolsHash {
    size_t operator()(const Symbols& symbols) const {
        uint64_t hash = fnv1a::kOffsetBasis;
        for (const int32_t symbol : symbols) hash = fnv1a::symbol(hash, static_cast<uint32_t>(symbol));
        return static_cast<size_t>(hash);
    }
};

struct ClassHash {
    size_t operator()(const ByteClass& bytes) const {
        uint64_t hash = fnv1a::kOffsetBasis;
        for (const uint64_t word : bytes) hash = fnv1a::symbol(hash, word);
        return static_cast<size_t>(hash);
    }
};

constexpr int32_t kSurrogateLow = 0xD800;
constexpr int32_t kSurrogateHigh = 0xDFFF;
constexpr int32_t kMaxCodePoint = 0x10FFFF;

using Range = std::pair<int32_t, int32_t>;
using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

// Sorted, merged ranges without the surrogates (``utf8_ranges.normalize``).
std::vector<Range> normalized(std::vector<Range> ranges) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<Range> merged;
    for (const Range& range : ranges) {
        if (!merged.empty() && static_cast<int64_t>(range.first) <= int64_t{merged.back().second} + 1) {
            merged.back().second = std::max(merged.back().second, range.second);
        } else {
            merged.push_back(range);
        }
    }
    std::vector<Range> result;
    for (const auto& [low, high] : merged) {
        if (low <= kSurrogateHigh && high >= kSurrogateLow) {
            if (low < kSurrogateLow) result.emplace_back(low, kSurrogateLow - 1);
            if (high > kSurrogateHigh) result.emplace_back(kSurrogateHigh + 1, high);
        } else {
            result.emplace_back(low, high);
        }
    }
    return result;
}

// The code points (surrogates excluded) no range covers (``utf8_ranges.complement``).
std::vector<Range> complement(const std::vector<Range>& ranges) {
    std::vector<Range> result;
    int32_t cursor = 0;
    for (const auto& [low, high] : normalized(ranges)) {
        if (low > cursor) result.emplace_back(cursor, low - 1);
        cursor = std::max(cursor, high + 1);
    }
    if (cursor <= kMaxCodePoint) result.emplace_back(cursor, kMaxCodePoint);
    return result;
}

int encode_utf8(int32_t code_point, uint8_t* out) {
    if (code_point < 0x80) {
        out[0] = static_cast<uint8_t>(code_point);
        return 1;
    }
    if (code_point < 0x800) {
        out[0] = static_cast<uint8_t>(0xC0 | code_point >> 6);
        out[1] = static_cast<uint8_t>(0x80 | (code_point & 0x3F));
        return 2;
    }
    if (code_point < 0x10000) {
        out[0] = static_cast<uint8_t>(0xE0 | code_point >> 12);
        out[1] = static_cast<uint8_t>(0x80 | (code_point >> 6 & 0x3F));
        out[2] = static_cast<uint8_t>(0x80 | (code_point & 0x3F));
        return 3;
    }
    out[0] = static_cast<uint8_t>(0xF0 | code_point >> 18);
    out[1] = static_cast<uint8_t>(0x80 | (code_point >> 12 & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (code_point >> 6 & 0x3F));
    out[3] = static_cast<uint8_t>(0x80 | (code_point & 0x3F));
    return 4;
}

// Byte-range sequences encoding exactly the code points low..high (``utf8_ranges._split``).
void split_utf8(int32_t low, int32_t high, std::vector<ByteRanges>& out) {
    for (const int32_t limit : {0x7F, 0x7FF, 0xFFFF}) {
        if (low <= limit && limit < high) {
            split_utf8(low, limit, out);
            split_utf8(limit + 1, high, out);
            return;
        }
    }
    if (high <= 0x7F) {
        out.push_back({{static_cast<uint8_t>(low), static_cast<uint8_t>(high)}});
        return;
    }
    for (int continuations = 1; continuations <= 3; ++continuations) {
        const int32_t mask = (1 << (6 * continuations)) - 1;
        if ((low & ~mask) != (high & ~mask)) {
            if ((low & mask) != 0) {
                split_utf8(low, low | mask, out);
                split_utf8((low | mask) + 1, high, out);
                return;
            }
            if ((high & mask) != mask) {
                split_utf8(low, (high & ~mask) - 1, out);
                split_utf8(high & ~mask, high, out);
                return;
            }
        }
    }
    uint8_t low_bytes[4];
    uint8_t high_bytes[4];
    const int length = encode_utf8(low, low_bytes);
    encode_utf8(high, high_bytes);
    ByteRanges sequence;
    for (int i = 0; i < length; ++i) sequence.emplace_back(low_bytes[i], high_bytes[i]);
    out.push_back(std::move(sequence));
}

ByteClass range_class(int low, int high) {
    ByteClass bytes{};
    for (int byte = low; byte <= high; ++byte) bytes[byte >> 6] |= uint64_t{1} << (byte & 63);
    return bytes;
}

int32_t terminal_symbol(int32_t index) { return -(index + 1); }

// Helper keys: the kind of helper, then its body (an alternative's length before each).
enum HelperKind : int32_t { kAlternatives = 0, kStar = 1, kPlus = 2 };

// Choices with at most this many options find repeated options by a linear scan.
constexpr int32_t kFewOptions = 8;

// Symbols stored elsewhere: ``size`` of them from ``data``.
struct Span {
    const int32_t* data;
    int32_t size;
};

// Where an option lies in the lowering's arena.
struct Bounds {
    size_t start;
    size_t size;
};

class Lowering {
   public:
    // Takes the rules' names for the grammar's first nonterminals; reads the rest of ``rules``.
    Lowering(RuleExprs& rules, int64_t max_symbols)
        : rules_(rules), max_symbols_(max_symbols), class_symbol_(rules.nodes.size(), kUnlowered),
          class_symbols_(rules.nodes.size()) {
        grammar_.names = std::move(rules.names);
        single_byte_.fill(-1);
    }

    Grammar run() {
        for (size_t rule = 0; rule < rules_.roots.size(); ++rule) {
            const ExprNode& root = rules_.nodes[rules_.roots[rule]];
            if (root.kind == ExprKind::Choice) {
                for (int32_t child = root.begin; child < root.end; ++child) {
                    add_lowered(static_cast<int32_t>(rule), rules_.children[child]);
                }
            } else {
                add_lowered(static_cast<int32_t>(rule), rules_.roots[rule]);
            }
        }
        grammar_.start = 0;
        return std::move(grammar_);
    }

   private:
    void spend(__int128 count) {
        symbols_ += count;
        if (symbols_ > max_symbols_) {
            throw LoweringError("the grammar expands to more than " + thousands(max_symbols_) +
                                " symbols (counted repetitions such as x{m,n} are written out in "
                                "full); lower the counts or use * and +");
        }
    }

    static std::string thousands(int64_t value) {
        std::string digits = std::to_string(value);
        for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(at, ",");
        return digits;
    }

    void add_production(int32_t lhs, const Symbols& rhs) {
        grammar_.add_production(lhs, rhs.data(), rhs.data() + rhs.size());
    }

    // A production of ``lhs``: ``node`` lowered (in the arena, given back after).
    void add_lowered(int32_t lhs, int32_t node) {
        sequence(node, arena_);
        add_production(lhs, arena_);
        arena_.clear();
    }

    int32_t terminal(const ByteClass& bytes) {
        const auto [found, added] =
            terminal_ids_.try_emplace(bytes, static_cast<int32_t>(grammar_.terminals.size()));
        if (added) grammar_.terminals.push_back(bytes);
        return terminal_symbol(found->second);
    }

    int32_t byte_terminal(uint8_t byte) {
        if (single_byte_[byte] < 0) single_byte_[byte] = terminal(range_class(byte, byte));
        return single_byte_[byte];
    }

    int32_t new_nonterminal(const char* hint) {
        grammar_.names.push_back(std::string(hint) + "#" + std::to_string(grammar_.names.size()));
        return static_cast<int32_t>(grammar_.names.size()) - 1;
    }

    int32_t helper(const std::vector<Symbols>& alternatives, const char* hint) {
        spans_.clear();
        for (const Symbols& alternative : alternatives) {
            spans_.push_back({alternative.data(), static_cast<int32_t>(alternative.size())});
        }
        return helper_of_spans(hint);
    }

    // The helper nonterminal whose productions are ``spans_``, in order (a new one unless an
    // equal helper exists).
    int32_t helper_of_spans(const char* hint) {
        key_.assign({kAlternatives, static_cast<int32_t>(spans_.size())});
        for (const Span& alternative : spans_) {
            key_.push_back(alternative.size);
            key_.insert(key_.end(), alternative.data, alternative.data + alternative.size);
        }
        const auto [found, added] = helpers_.try_emplace(key_, 0);
        if (added) {
            found->second = new_nonterminal(hint);
            for (const Span& alternative : spans_) {
                grammar_.add_production(found->second, alternative.data, alternative.data + alternative.size);
            }
        }
        return found->second;
    }

    int32_t repetition(const Symbols& body, bool at_least_one) {
        key_.assign({at_least_one ? kPlus : kStar});
        key_.insert(key_.end(), body.begin(), body.end());
        const auto [found, added] = helpers_.try_emplace(key_, 0);
        if (added) {
            const int32_t nonterminal = new_nonterminal(at_least_one ? "plus" : "star");
            found->second = nonterminal;
            add_production(nonterminal, at_least_one ? body : Symbols{});
            Symbols recursive{nonterminal};
            recursive.insert(recursive.end(), body.begin(), body.end());
            add_production(nonterminal, recursive);
        }
        return found->second;
    }

    Symbols lowered(int32_t node) {
        Symbols out;
        sequence(node, out);
        return out;
    }

    // Appends the symbols of ``node`` to ``out`` (``_Lowering.sequence``).
    void sequence(int32_t node, Symbols& out) {
        const ExprNode& expr = rules_.nodes[node];
        switch (expr.kind) {
            case ExprKind::Literal:
                spend(expr.end - expr.begin);
                for (int32_t at = expr.begin; at < expr.end; ++at) {
                    out.push_back(byte_terminal(static_cast<uint8_t>(rules_.text[at])));
                }
                return;
            case ExprKind::CharClass:
                char_class(node, out);
                return;
            case ExprKind::RuleRef:
                out.push_back(expr.target);
                return;
            case ExprKind::Sequence:
                for (int32_t child = expr.begin; child < expr.end; ++child) sequence(rules_.children[child], out);
                return;
            case ExprKind::Choice:
                choice(expr, out);
                return;
            case ExprKind::Repeat:
                repeat(expr, out);
                return;
        }
    }

    // The options are lowered one after another into the arena (a nested choice stacks its
    // own above them and gives that space back), a repeated option dropped as soon as it is
    // lowered; ``bounds_`` holds the kept ones' places, also as a stack.
    void choice(const ExprNode& expr, Symbols& out) {
        const size_t base = arena_.size();
        const size_t first = bounds_.size();
        const bool many = expr.end - expr.begin > kFewOptions;
        std::vector<int32_t> slots;  // only for choices of many options: kept options by hash
        if (many) {
            size_t capacity = 64;
            while (capacity < 4 * static_cast<size_t>(expr.end - expr.begin)) capacity *= 2;
            slots.assign(capacity, -1);
        }
        for (int32_t child = expr.begin; child < expr.end; ++child) {
            const size_t start = arena_.size();
            sequence(rules_.children[child], arena_);
            const Bounds option{start, arena_.size() - start};
            if (many ? kept_in(slots, option, first) : kept_among(option, first)) {
                arena_.resize(start);
            } else {
                bounds_.push_back(option);
            }
        }
        if (bounds_.size() - first == 1) {
            const Bounds only = bounds_[first];  // at ``base``: the first option is always kept
            bounds_.resize(first);
            if (&out != &arena_) {
                out.insert(out.end(), arena_.begin() + static_cast<std::ptrdiff_t>(only.start),
                           arena_.begin() + static_cast<std::ptrdiff_t>(only.start + only.size));
                arena_.resize(base);
            }
            return;
        }
        spans_.clear();
        for (size_t k = first; k < bounds_.size(); ++k) {
            spans_.push_back({arena_.data() + bounds_[k].start, static_cast<int32_t>(bounds_[k].size)});
        }
        const int32_t symbol = helper_of_spans("group");
        bounds_.resize(first);
        arena_.resize(base);
        out.push_back(symbol);
    }

    bool same_option(const Bounds& a, const Bounds& b) const {
        return a.size == b.size && std::equal(arena_.begin() + static_cast<std::ptrdiff_t>(a.start),
                                              arena_.begin() + static_cast<std::ptrdiff_t>(a.start + a.size),
                                              arena_.begin() + static_cast<std::ptrdiff_t>(b.start));
    }

    // Whether an option equal to ``option`` is among the kept ones from ``bounds_[first]``.
    bool kept_among(const Bounds& option, size_t first) const {
        for (size_t k = first; k < bounds_.size(); ++k) {
            if (same_option(bounds_[k], option)) return true;
        }
        return false;
    }

    // The same, by an open-addressing table over the kept options (at most a quarter full),
    // where ``option`` goes in unless it is there.
    bool kept_in(std::vector<int32_t>& slots, const Bounds& option, size_t first) const {
        uint64_t hash = fnv1a::kOffsetBasis;
        for (size_t at = option.start; at < option.start + option.size; ++at) {
            hash = fnv1a::symbol(hash, static_cast<uint32_t>(arena_[at]));
        }
        const size_t mask = slots.size() - 1;
        for (size_t at = static_cast<size_t>(hash) & mask;; at = (at + 1) & mask) {
            if (slots[at] < 0) {
                slots[at] = static_cast<int32_t>(bounds_.size() - first);
                return false;
            }
            if (same_option(bounds_[first + static_cast<size_t>(slots[at])], option)) return true;
        }
    }

    void repeat(const ExprNode& expr, Symbols& out) {
        const Symbols body = lowered(expr.target);
        if (body.empty()) return;
        const int64_t copies = expr.high < 0 ? expr.low : expr.high;
        spend(static_cast<__int128>(body.size()) * copies + (__int128{copies} - expr.low));
        if (expr.high < 0) {
            if (expr.low == 0) {
                out.push_back(repetition(body, false));
                return;
            }
            for (int64_t i = 1; i < expr.low; ++i) out.insert(out.end(), body.begin(), body.end());
            out.push_back(repetition(body, true));
            return;
        }
        Symbols tail;
        for (int64_t i = expr.low; i < expr.high; ++i) {
            Symbols longer = body;
            longer.insert(longer.end(), tail.begin(), tail.end());
            tail = {helper({Symbols{}, std::move(longer)}, "opt")};
        }
        for (int64_t i = 0; i < expr.low; ++i) out.insert(out.end(), body.begin(), body.end());
        out.insert(out.end(), tail.begin(), tail.end());
    }

    // Appends a character class's symbols, lowered once per node
    // (``_Lowering.lower_char_class``). Most lower to one symbol, kept in ``class_symbol_``;
    // the others' symbols are in ``class_symbols_``.
    void char_class(int32_t node, Symbols& out) {
        int32_t& symbol = class_symbol_[node];
        if (symbol == kUnlowered) symbol = lower_char_class(node);
        if (symbol != kSeveral) {
            out.push_back(symbol);
        } else {
            const Symbols& symbols = class_symbols_[node];
            out.insert(out.end(), symbols.begin(), symbols.end());
        }
    }

    // The class's one symbol, or kSeveral with its symbols stored.
    int32_t lower_char_class(int32_t node) {
        const ExprNode& expr = rules_.nodes[node];
        const int32_t ascii = ascii_class(expr);
        if (ascii != kUnlowered) return ascii;
        std::vector<Range> ranges(rules_.ranges.begin() + expr.begin, rules_.ranges.begin() + expr.end);
        if (expr.negated) ranges = complement(ranges);
        std::vector<ByteRanges> sequences;
        for (const auto& [low, high] : normalized(ranges)) split_utf8(low, high, sequences);
        ByteClass single_byte{};
        bool any_single = false;
        std::vector<Symbols> alternatives;
        for (const ByteRanges& sequence : sequences) {
            if (sequence.size() == 1) {
                const ByteClass bytes = range_class(sequence[0].first, sequence[0].second);
                for (int word = 0; word < 4; ++word) single_byte[word] |= bytes[word];
                any_single = true;
                continue;
            }
            Symbols alternative;
            for (const auto& [low, high] : sequence) alternative.push_back(terminal(range_class(low, high)));
            alternatives.push_back(std::move(alternative));
        }
        if (any_single) alternatives.insert(alternatives.begin(), Symbols{terminal(single_byte)});
        if (alternatives.empty()) return helper({}, "never");
        if (alternatives.size() > 1) return helper(alternatives, "char");
        if (alternatives[0].size() == 1) return alternatives[0][0];
        class_symbols_[node] = std::move(alternatives[0]);
        return kSeveral;
    }

    // Most classes of a JSON grammar are a few ASCII ranges: one byte each, so the general
    // path would give one terminal of their bytes. Taken directly, without its vectors;
    // kUnlowered for any other class.
    int32_t ascii_class(const ExprNode& expr) {
        if (expr.negated || expr.begin == expr.end) return kUnlowered;
        ByteClass bytes{};
        for (int32_t at = expr.begin; at < expr.end; ++at) {
            const auto [low, high] = rules_.ranges[at];
            if (high > 0x7F) return kUnlowered;
            const ByteClass range = range_class(low, high);
            for (int word = 0; word < 4; ++word) bytes[word] |= range[word];
        }
        return terminal(bytes);
    }

    static constexpr int32_t kUnlowered = INT32_MIN;  // no symbol is this negative
    static constexpr int32_t kSeveral = INT32_MIN + 1;

    const RuleExprs& rules_;
    const int64_t max_symbols_;
    __int128 symbols_ = 0;
    Grammar grammar_;
    std::unordered_map<ByteClass, int32_t, ClassHash> terminal_ids_;
    std::array<int32_t, 256> single_byte_{};
    std::unordered_map<Symbols, int32_t, SymbolsHash> helpers_;
    Symbols key_;  // the key of the helper being looked up, its buffer reused
    Symbols arena_;  // options being lowered, nested choices' stacked (see choice)
    std::vector<Bounds> bounds_;  // the kept options' places in the arena, stacked alike
    std::vector<Span> spans_;     // the productions of the helper being looked up
    std::vector<int32_t> class_symbol_;   // per node: its class's one symbol, or a sentinel
    std::vector<Symbols> class_symbols_;  // per node: the symbols of a class of several
};

// Production ``p`` of ``grammar`` as one hash (its left side, then its right side).
uint64_t production_hash(const Grammar& grammar, size_t p) {
    uint64_t hash = fnv1a::symbol(fnv1a::kOffsetBasis, static_cast<uint32_t>(grammar.lhs[p]));
    for (int32_t i = 0; i < grammar.rhs_length(p); ++i) hash = fnv1a::symbol(hash, static_cast<uint32_t>(grammar.rhs(p)[i]));
    return hash;
}

bool same_production(const Grammar& grammar, size_t a, size_t b) {
    return grammar.lhs[a] == grammar.lhs[b] && grammar.rhs_length(a) == grammar.rhs_length(b) &&
           std::equal(grammar.rhs(a), grammar.rhs(a) + grammar.rhs_length(a), grammar.rhs(b));
}

// The productions of ``grammar``, each first occurrence only, as a set of indices: open
// addressing over production indices, so an insertion allocates nothing.
class ProductionSet {
   public:
    // A set of at most ``most`` productions of ``grammar`` (which may still be growing).
    ProductionSet(const Grammar& grammar, size_t most) : grammar_(grammar) {
        size_t capacity = 16;
        while (capacity < 2 * most) capacity *= 2;
        slots_.assign(capacity, -1);
    }

    // False when an equal production is in already. At most half the slots are ever taken.
    bool insert(size_t p) {
        const size_t mask = slots_.size() - 1;
        for (size_t at = static_cast<size_t>(production_hash(grammar_, p)) & mask;; at = (at + 1) & mask) {
            const int32_t held = slots_[at];
            if (held < 0) {
                slots_[at] = static_cast<int32_t>(p);
                return true;
            }
            if (same_production(grammar_, static_cast<size_t>(held), p)) return false;
        }
    }

   private:
    const Grammar& grammar_;
    std::vector<int32_t> slots_;
};

// Which nonterminals derive some string: a production fires once every nonterminal on its
// right is productive (a worklist, linear in the grammar's size).
std::vector<char> productive(const Grammar& grammar) {
    const size_t nonterminals = grammar.names.size();
    std::vector<int32_t> waiting(grammar.production_count(), 0);
    std::vector<int32_t> uses_begin(nonterminals + 1, 0);
    for (const int32_t symbol : grammar.symbols) {
        if (symbol >= 0) ++uses_begin[symbol + 1];
    }
    for (size_t n = 0; n < nonterminals; ++n) uses_begin[n + 1] += uses_begin[n];
    std::vector<int32_t> uses(static_cast<size_t>(uses_begin[nonterminals]));
    std::vector<int32_t> filled(uses_begin.begin(), uses_begin.end() - 1);
    std::vector<int32_t> ready;
    for (size_t p = 0; p < grammar.production_count(); ++p) {
        for (int32_t i = 0; i < grammar.rhs_length(p); ++i) {
            const int32_t symbol = grammar.rhs(p)[i];
            if (symbol >= 0) {
                ++waiting[p];
                uses[filled[symbol]++] = static_cast<int32_t>(p);
            }
        }
        if (waiting[p] == 0) ready.push_back(static_cast<int32_t>(p));
    }
    std::vector<char> result(nonterminals, 0);
    while (!ready.empty()) {
        const int32_t lhs = grammar.lhs[ready.back()];
        ready.pop_back();
        if (result[lhs]) continue;
        result[lhs] = 1;
        for (int32_t at = uses_begin[lhs]; at < uses_begin[lhs + 1]; ++at) {
            if (--waiting[uses[at]] == 0) ready.push_back(uses[at]);
        }
    }
    return result;
}

// The grammar of the ``kept`` productions with the ``dropped`` nonterminals left out of every
// right side, over the nonterminals with a production (and the start) and the terminals
// used, both in their old order, each production once (``transforms._renumber``). The names
// move to the new grammar: ``grammar`` is replaced by it.
Grammar renumber(Grammar& grammar, const std::vector<char>& kept, const std::vector<char>& dropped) {
    std::vector<int32_t> new_nonterminal(grammar.names.size(), -1);
    std::vector<int32_t> new_terminal(grammar.terminals.size(), -1);
    new_nonterminal[grammar.start] = 0;
    for (size_t p = 0; p < grammar.production_count(); ++p) {
        if (!kept[p]) continue;
        new_nonterminal[grammar.lhs[p]] = 0;
        for (int32_t i = 0; i < grammar.rhs_length(p); ++i) {
            const int32_t symbol = grammar.rhs(p)[i];
            if (symbol < 0) new_terminal[terminal_index(symbol)] = 0;
        }
    }
    Grammar result;
    for (size_t old = 0; old < new_nonterminal.size(); ++old) {
        if (new_nonterminal[old] < 0) continue;
        new_nonterminal[old] = static_cast<int32_t>(result.names.size());
        result.names.push_back(std::move(grammar.names[old]));
    }
    for (size_t old = 0; old < new_terminal.size(); ++old) {
        if (new_terminal[old] < 0) continue;
        new_terminal[old] = static_cast<int32_t>(result.terminals.size());
        result.terminals.push_back(grammar.terminals[old]);
    }
    result.start = new_nonterminal[grammar.start];
    result.lhs.reserve(grammar.production_count());
    result.rhs_begin.reserve(grammar.production_count() + 1);
    result.symbols.reserve(grammar.symbols.size());
    ProductionSet seen(result, grammar.production_count());
    for (size_t p = 0; p < grammar.production_count(); ++p) {
        if (!kept[p]) continue;
        result.lhs.push_back(new_nonterminal[grammar.lhs[p]]);
        for (int32_t i = 0; i < grammar.rhs_length(p); ++i) {
            const int32_t symbol = grammar.rhs(p)[i];
            if (symbol >= 0 && dropped[symbol]) continue;
            result.symbols.push_back(symbol >= 0 ? new_nonterminal[symbol]
                                                 : terminal_symbol(new_terminal[terminal_index(symbol)]));
        }
        result.rhs_begin.push_back(static_cast<int32_t>(result.symbols.size()));
        if (!seen.insert(result.production_count() - 1)) {
            result.lhs.pop_back();
            result.rhs_begin.pop_back();
            result.symbols.resize(static_cast<size_t>(result.rhs_begin.back()));
        }
    }
    return result;
}

// Without productions that derive nothing or that the start cannot reach; false when
// nothing was removed and no production repeats (``transforms._remove_useless``).
bool remove_useless(Grammar& grammar) {
    const std::vector<char> productive_ones = productive(grammar);
    if (!productive_ones[grammar.start]) throw LoweringError("the grammar's start rule derives no string");
    const size_t nonterminals = grammar.names.size();
    std::vector<char> kept(grammar.production_count(), 0);
    std::vector<int32_t> by_lhs_begin(nonterminals + 1, 0);
    for (size_t p = 0; p < grammar.production_count(); ++p) {
        bool keep = productive_ones[grammar.lhs[p]];
        for (int32_t i = 0; keep && i < grammar.rhs_length(p); ++i) {
            const int32_t symbol = grammar.rhs(p)[i];
            keep = symbol < 0 || productive_ones[symbol];
        }
        kept[p] = keep;
        if (keep) ++by_lhs_begin[grammar.lhs[p] + 1];
    }
    for (size_t n = 0; n < nonterminals; ++n) by_lhs_begin[n + 1] += by_lhs_begin[n];
    std::vector<int32_t> by_lhs(static_cast<size_t>(by_lhs_begin[nonterminals]));
    std::vector<int32_t> filled(by_lhs_begin.begin(), by_lhs_begin.end() - 1);
    for (size_t p = 0; p < grammar.production_count(); ++p) {
        if (kept[p]) by_lhs[filled[grammar.lhs[p]]++] = static_cast<int32_t>(p);
    }
    std::vector<char> reachable(nonterminals, 0);
    reachable[grammar.start] = 1;
    std::vector<int32_t> stack{grammar.start};
    while (!stack.empty()) {
        const int32_t nonterminal = stack.back();
        stack.pop_back();
        for (int32_t at = by_lhs_begin[nonterminal]; at < by_lhs_begin[nonterminal + 1]; ++at) {
            const size_t p = static_cast<size_t>(by_lhs[at]);
            for (int32_t i = 0; i < grammar.rhs_length(p); ++i) {
                const int32_t symbol = grammar.rhs(p)[i];
                if (symbol >= 0 && !reachable[symbol]) {
                    reachable[symbol] = 1;
                    stack.push_back(symbol);
                }
            }
        }
    }
    bool removed = false;
    for (size_t p = 0; p < grammar.production_count(); ++p) {
        kept[p] = kept[p] && reachable[grammar.lhs[p]];
        removed = removed || !kept[p];
    }
    if (!removed && std::all_of(reachable.begin(), reachable.end(), [](char r) { return r != 0; })) {
        ProductionSet seen(grammar, grammar.production_count());
        bool repeated = false;
        for (size_t p = 0; p < grammar.production_count() && !repeated; ++p) repeated = !seen.insert(p);
        if (!repeated) return false;
    }
    grammar = renumber(grammar, kept, std::vector<char>(nonterminals, 0));
    return true;
}

// Without the nonterminals (other than the start) whose every production is empty, dropped
// from every right-hand side; false when there are none (``_drop_empty_only_rules``).
bool drop_empty_only_rules(Grammar& grammar) {
    std::vector<int8_t> state(grammar.names.size(), -1);  // -1: no production yet
    for (size_t p = 0; p < grammar.production_count(); ++p) {
        int8_t& empty_only = state[grammar.lhs[p]];
        empty_only = (empty_only != 0 && grammar.rhs_length(p) == 0) ? 1 : 0;
    }
    state[grammar.start] = 0;
    std::vector<char> dropped(state.size(), 0);
    bool any = false;
    for (size_t n = 0; n < state.size(); ++n) {
        dropped[n] = state[n] == 1;
        any = any || dropped[n];
    }
    if (!any) return false;
    std::vector<char> kept(grammar.production_count(), 0);
    for (size_t p = 0; p < grammar.production_count(); ++p) kept[p] = !dropped[grammar.lhs[p]];
    grammar = renumber(grammar, kept, dropped);
    return true;
}

}  // namespace

Grammar simplify(Grammar grammar) {
    while (true) {
        remove_useless(grammar);
        if (!drop_empty_only_rules(grammar)) return grammar;
    }
}

Grammar lower_and_simplify(RuleExprs rules, int64_t max_symbols) {
    return simplify(Lowering(rules, max_symbols).run());
}

}  // namespace cad::cfg
