#!/usr/bin/env python3
"""Converts Baidu DeepBench's training results (baidu-research/DeepBench, results/train/*.xlsx:
kernel times of dense GEMMs, convolutions and recurrent layers, per device and precision) into
plain CSV files under data/deepbench/, one per kernel kind, every row naming its device, its
sheet's precision and the workbook it came from. trainbench itself reads CSV only; this
script needs python3-openpyxl (a Debian package) and is not part of the build.

Usage:
  scripts/deepbench_to_csv.py OUT_DIR SOURCE_LABEL FILE.xlsx...
e.g. with the repository at commit da81ba78 checked out or mirrored:
  git --git-dir=DeepBench/.git show HEAD:results/train/DeepBench_NV_V100.xlsx > /tmp/V100.xlsx
  scripts/deepbench_to_csv.py data/deepbench baidu-research/DeepBench@da81ba78 /tmp/V100.xlsx

Columns are DeepBench's own, renamed to lower-case words; times are milliseconds as
published ("N/A" cells stay empty). TERAFLOPS columns are DeepBench's, kept for checking.
"""
import csv
import os
import sys

import openpyxl

SECTIONS = {
    "Dense Matrix Multiplication": ("gemm", ["m", "n", "k", "a_transpose", "b_transpose", None,
                                             "time_ms", "tflops"]),
    "Convolution": ("conv", ["w", "h", "c", "n", "k", "s", "r", "pad_w", "pad_h", "stride_w",
                             "stride_h", "forward_ms", "backward_inputs_ms",
                             "backward_params_ms", None, "p", "q", "total_ms",
                             "forward_tflops", "backward_inputs_tflops",
                             "backward_params_tflops"]),
    "Recurrent Layers - Vanilla": ("rnn", ["hidden", "n", "timesteps", None, "forward_ms",
                                           "backward_inputs_ms", "backward_weights_ms",
                                           "forward_tflops", "backward_inputs_tflops",
                                           "backward_weights_tflops", "total_ms"]),
    "Recurrent Layers - LSTM": ("lstm", None),
    "Recurrent Layers - GRU": ("gru", None),
}
SECTIONS["Recurrent Layers - LSTM"] = ("lstm", SECTIONS["Recurrent Layers - Vanilla"][1])
SECTIONS["Recurrent Layers - GRU"] = ("gru", SECTIONS["Recurrent Layers - Vanilla"][1])


def cell(v):
    if v is None:
        return ""
    if isinstance(v, str):
        v = v.strip()
        return "" if v.upper().startswith("N/A") else v
    return repr(v) if isinstance(v, float) else str(v)


def device_of(ws_specs, path):
    if ws_specs is not None:
        for row in ws_specs.iter_rows(values_only=True):
            if row and row[0] == "GPU Model" and row[1]:
                return str(row[1]).strip()
    return os.path.basename(path).replace("DeepBench_", "").replace(".xlsx", "")


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out_dir, label, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    rows = {kind: [] for kind, _ in SECTIONS.values()}
    headers = {kind: cols for kind, cols in SECTIONS.values()}
    for path in files:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
        specs = wb["Specs"] if "Specs" in wb.sheetnames else None
        device = device_of(specs, path)
        for ws in wb.worksheets:
            if ws.title == "Specs":
                continue
            precision = ""
            kind = None
            for row in ws.iter_rows(values_only=True):
                first = row[0].strip() if isinstance(row[0], str) else row[0]
                if first == "Precision":
                    precision = " ".join(str(row[1]).split())
                    continue
                if first in SECTIONS:
                    kind = SECTIONS[first][0]
                    continue
                if first is not None and first not in SECTIONS:
                    kind = None  # a section this script does not read (All-Reduce, ...)
                    continue
                if kind is None or len(row) < 3 or not isinstance(row[2], (int, float)):
                    continue
                cols = headers[kind]
                values = [cell(v) for name, v in zip(cols, row[2:]) if name]
                rows[kind].append([device, precision, ws.title, cell(row[1])] + values +
                                  [os.path.basename(path), label])
    for kind, data in rows.items():
        if not data:
            continue
        names = [c for c in headers[kind] if c]
        with open(os.path.join(out_dir, f"{kind}.csv"), "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["device", "precision", "sheet", "application"] + names +
                       ["workbook", "source"])
            w.writerows(data)
        print(f"{kind}: {len(data)} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
