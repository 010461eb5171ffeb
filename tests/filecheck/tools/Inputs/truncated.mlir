builtin.module {
  bir.function @f attributes {inputs = [], outputs = []} {
