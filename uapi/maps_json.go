package uapi

import (
	"encoding/json"
	"strconv"
)

// vmaJSON is one VMA as JSON, its fields named as struct procmap_query's.
type vmaJSON struct {
	Start    string  `json:"vma_start"`
	End      string  `json:"vma_end"`
	Perms    string  `json:"perms"`
	Offset   string  `json:"vma_offset"`
	DevMajor uint32  `json:"dev_major"`
	DevMinor uint32  `json:"dev_minor"`
	Inode    uint64  `json:"inode"`
	PageSize uint64  `json:"vma_page_size,omitempty"`
	Name     *string `json:"name"`
}

// AppendJSON appends v as one JSON object and a newline, with the field
// names of struct procmap_query: vma_start, vma_end and vma_offset as "0x..."
// strings, perms as the maps text has them ("r-xp"), dev_major, dev_minor,
// inode, name (null for none) and vma_page_size when PROCMAP_QUERY gave it.
func (v *VMA) AppendJSON(b []byte) []byte {
	j := vmaJSON{
		Start:    "0x" + strconv.FormatUint(v.Start, 16),
		End:      "0x" + strconv.FormatUint(v.End, 16),
		Perms:    v.Flags.String(),
		Offset:   "0x" + strconv.FormatUint(v.Offset, 16),
		DevMajor: v.DevMajor,
		DevMinor: v.DevMinor,
		Inode:    v.Inode,
		PageSize: v.PageSize, // only PROCMAP_QUERY gives it
	}
	if v.Name != nil {
		s := string(v.Name)
		j.Name = &s
	}
	out, _ := json.Marshal(j)
	return append(append(b, out...), '\n')
}
