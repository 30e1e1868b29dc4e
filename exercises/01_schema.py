"""Exercise 01.schema (easy): write a schema.

`scale_` multiplies its first argument `x` in place by `factor`, a float that defaults to 2.0. An optional float
`limit`, which can only be passed by keyword, clamps the result (None, the default: no clamp). It returns nothing.
Write its schema, the name included, as you would pass it to m.def(...) in C++ or to a Library's define() in Python.
"""

SCHEMA = "scale_(Tensor x, float factor) -> Tensor"  # TODO
