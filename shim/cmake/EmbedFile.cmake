# cmake -DINPUT=<file> -DOUTPUT=<file.inc> -DNAME=<identifier> -P EmbedFile.cmake
# Writes the bytes of INPUT as a C++ array definition (included by device_gate.cpp).
file(READ "${INPUT}" _hex HEX)
string(LENGTH "${_hex}" _len)
math(EXPR _bytes "${_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _body "${_hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n" _body "${_body}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from the device gate fatbin by shim/cmake/EmbedFile.cmake. Do not edit.\n"
  "alignas(64) const unsigned char ${NAME}[${_bytes}] = {\n${_body}\n};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
