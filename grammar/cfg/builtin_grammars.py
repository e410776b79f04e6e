"""Ready-made grammars in the text format: JSON, arithmetic and FunQL (GeoQuery-style
semantic parses such as ``answer(count(state(loc_2(countryid('usa')))))``)."""

from __future__ import annotations

JSON = r"""
root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+-]? [0-9]+ )?
ws ::= [ \t\n\r]*
"""
"""JSON values with optional whitespace inside objects and arrays (LR(1): runs as a DPDA)."""

ARITHMETIC = r"""
root ::= expr
expr ::= expr ( "+" | "-" ) term | term
term ::= term ( "*" | "/" ) factor | factor
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]+ ( "." [0-9]+ )?
"""
"""Left-recursive arithmetic with precedence (LR(1))."""

AMBIGUOUS_ARITHMETIC = r"""
root ::= expr
expr ::= expr "+" expr | expr "*" expr | expr expr | "(" expr ")" | [0-9]+
"""
"""Arithmetic without precedence and with juxtaposition: ambiguous, so it runs on Earley."""

FUNQL = r"""
root ::= "answer(" query ")"
query ::= unary "(" query ")" | unary "(all)" | binary "(" query "," query ")" | entity
unary ::= "state" | "city" | "river" | "lake" | "mountain" | "place" | "capital"
        | "capital_1" | "loc_1" | "loc_2" | "count" | "largest" | "smallest" | "highest"
        | "lowest" | "longest" | "shortest" | "population_1" | "size" | "area_1"
        | "density_1" | "elevation_1" | "len" | "major" | "traverse_1" | "traverse_2"
        | "next_to_1" | "next_to_2" | "high_point_1" | "low_point_1" | "sum" | "most" | "fewest"
binary ::= "exclude" | "intersection"
entity ::= "stateid('" name "')" | "cityid('" name "'," ( "'" [a-z]{2} "'" | "_" ) ")"
         | "countryid('" name "')" | "riverid('" name "')" | "placeid('" name "')"
name ::= [a-z]+ ( " " [a-z]+ )*
"""
"""FunQL over GeoQuery predicates (LR(1))."""
