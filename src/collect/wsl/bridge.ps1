# gputaskman's WSL host bridge: runs in Windows PowerShell on the Windows
# side (started through WSL interop) and writes the WDDM GPU counters to
# stdout once a second, in the line format src/collect/wsl/mod.rs reads.
# It ends when its stdout is closed (the first failed write stops it).
$ErrorActionPreference = 'Stop'
$inv = [Globalization.CultureInfo]::InvariantCulture
$out = New-Object IO.StreamWriter([Console]::OpenStandardOutput(), (New-Object Text.UTF8Encoding($false)))
$out.AutoFlush = $false
$out.WriteLine('gputaskman-bridge 1')
$out.Flush()

# Adapter LUIDs and their PCI addresses (gdi32's D3DKMT calls), so the Linux
# side matches the counters' adapters to NVML's devices by LUID.
$adapters = @()
try {
    Add-Type -TypeDefinition @'
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
public static class GputaskmanD3dkmt {
    [StructLayout(LayoutKind.Sequential)] struct AdapterInfo { public uint Handle; public uint LuidLow; public int LuidHigh; public uint Sources; public int Precise; }
    [StructLayout(LayoutKind.Sequential)] struct EnumAdapters2 { public uint Count; public IntPtr Adapters; }
    [StructLayout(LayoutKind.Sequential)] struct QueryInfo { public uint Handle; public int Type; public IntPtr Data; public uint Size; }
    [StructLayout(LayoutKind.Sequential)] struct CloseAdapter { public uint Handle; }
    [DllImport("gdi32.dll")] static extern int D3DKMTEnumAdapters2(ref EnumAdapters2 e);
    [DllImport("gdi32.dll")] static extern int D3DKMTQueryAdapterInfo(ref QueryInfo q);
    [DllImport("gdi32.dll")] static extern int D3DKMTCloseAdapter(ref CloseAdapter c);
    public static string[] List() {
        var result = new List<string>();
        var e = new EnumAdapters2();
        if (D3DKMTEnumAdapters2(ref e) != 0 || e.Count == 0 || e.Count > 64) return result.ToArray();
        int size = Marshal.SizeOf(typeof(AdapterInfo));
        e.Adapters = Marshal.AllocHGlobal(size * (int)e.Count);
        IntPtr address = Marshal.AllocHGlobal(12);
        try {
            if (D3DKMTEnumAdapters2(ref e) != 0) return result.ToArray();
            for (int i = 0; i < e.Count; i++) {
                var a = (AdapterInfo)Marshal.PtrToStructure(new IntPtr(e.Adapters.ToInt64() + i * size), typeof(AdapterInfo));
                // KMTQAITYPE_ADAPTERADDRESS = 6: D3DKMT_ADAPTERADDRESS { bus, device, function }.
                var q = new QueryInfo { Handle = a.Handle, Type = 6, Data = address, Size = 12 };
                if (D3DKMTQueryAdapterInfo(ref q) == 0) {
                    result.Add(String.Format("adapter 0x{0:X8} 0x{1:X8} {2} {3} {4}", a.LuidHigh, a.LuidLow,
                        Marshal.ReadInt32(address, 0), Marshal.ReadInt32(address, 4), Marshal.ReadInt32(address, 8)));
                }
                var c = new CloseAdapter { Handle = a.Handle };
                D3DKMTCloseAdapter(ref c);
            }
        } finally {
            Marshal.FreeHGlobal(e.Adapters);
            Marshal.FreeHGlobal(address);
        }
        return result.ToArray();
    }
}
'@
    $d3dkmt = $true
} catch {
    $d3dkmt = $false
    $d3dkmtWhy = 'note adapter addresses unavailable: ' + ($_.Exception.Message -replace '\s+', ' ')
}
# The LUIDs the table knows, as the counter instance names spell them.
function Read-Adapters {
    if (-not $d3dkmt) { return @($d3dkmtWhy) }
    try { return @([GputaskmanD3dkmt]::List()) }
    catch { return @('note adapter addresses unavailable: ' + ($_.Exception.Message -replace '\s+', ' ')) }
}
function Get-Luids($list) {
    $known = @{}
    foreach ($a in $list) {
        if ($a -match '^adapter 0x([0-9A-Fa-f]{8}) 0x([0-9A-Fa-f]{8}) ') {
            $known[('luid_0x' + $Matches[1] + '_0x' + $Matches[2]).ToLowerInvariant()] = $true
        }
    }
    return $known
}
$adapters = Read-Adapters
$luids = Get-Luids $adapters
$adaptersReadAt = [DateTime]::UtcNow

$paths = @(
    '\GPU Process Memory(*)\Local Usage',
    '\GPU Process Memory(*)\Non Local Usage',
    '\GPU Process Memory(*)\Dedicated Usage',
    '\GPU Process Memory(*)\Shared Usage',
    '\GPU Process Memory(*)\Total Committed',
    '\GPU Engine(*)\Running Time',
    '\GPU Adapter Memory(*)\Dedicated Usage',
    '\GPU Adapter Memory(*)\Shared Usage',
    '\GPU Adapter Memory(*)\Total Committed',
    '\GPU Local Adapter Memory(*)\Local Usage'
)
while ($true) {
    $problems = $null
    # Each call expands the wildcards again, so new processes appear.
    $set = Get-Counter -Counter $paths -ErrorAction SilentlyContinue -ErrorVariable problems
    if ($null -eq $set) {
        $why = if ($problems) { $problems[0].Exception.Message -replace '\s+', ' ' } else { 'no counters' }
        $out.WriteLine('error Get-Counter: ' + $why)
        $out.Flush()
        Start-Sleep -Seconds 1
        continue
    }
    $at = ([DateTimeOffset]$set.Timestamp).ToUnixTimeMilliseconds()
    $out.WriteLine('begin ' + $at.ToString($inv))
    $pids = @{}
    $unknownLuid = $false
    foreach ($s in $set.CounterSamples) {
        # An invalid sample (Status != 0) carries a CookedValue of 0 that
        # was never measured: left out, as the native path drops them.
        if ($s.Status -ne 0) { continue }
        $out.WriteLine($s.Path + "`t" + $s.CookedValue.ToString('R', $inv))
        if ($s.InstanceName -match '^pid_(\d+)_') { $pids[[int]$Matches[1]] = $true }
        if ($s.InstanceName -match '(luid_0x[0-9a-f]{8}_0x[0-9a-f]{8})' -and -not $luids.ContainsKey($Matches[1].ToLowerInvariant())) {
            $unknownLuid = $true
        }
    }
    # A LUID the table lacks (it failed, or an adapter was reset or added):
    # read it again, at most every 30 s.
    if ($unknownLuid -and ([DateTime]::UtcNow - $adaptersReadAt).TotalSeconds -ge 30) {
        $adapters = Read-Adapters
        $luids = Get-Luids $adapters
        $adaptersReadAt = [DateTime]::UtcNow
    }
    if ($pids.Count -gt 0) {
        foreach ($p in (Get-Process -Id @($pids.Keys) -ErrorAction SilentlyContinue)) {
            $out.WriteLine('proc ' + $p.Id.ToString($inv) + ' ' + $p.ProcessName)
        }
    }
    foreach ($a in $adapters) { $out.WriteLine($a) }
    foreach ($p in @($problems | Select-Object -First 3)) {
        $out.WriteLine('note ' + ($p.Exception.Message -replace '\s+', ' '))
    }
    $out.WriteLine('end')
    $out.Flush()
}
